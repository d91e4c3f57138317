// Package geminipath reads the paths of Google's Gemini API: which requests
// are Gemini's, and for a model's method (POST
// /v1beta/models/{model}:generateContent) the model and the method, which
// Gemini puts in the path where the other formats put them in the body.
package geminipath

import "bytes"

// The methods of a model that are conversation turns.
const (
	MethodGenerate = "generateContent"
	MethodStream   = "streamGenerateContent"
)

// Call is a model's method as a path names it:
// /{Version}/models/{Model}:{Method}.
type Call struct {
	Version string // v1beta, v1, v1alpha
	Model   string // as in the path, e.g. gemini-2.5-pro
	Method  string // generateContent, streamGenerateContent, countTokens, …
}

// Turn reports whether the call is a conversation turn (generateContent or
// streamGenerateContent); countTokens and every other method pass through.
func (c Call) Turn() bool { return c.Method == MethodGenerate || c.Method == MethodStream }

// Stream reports whether the answer is streamed: Gemini says so by the
// method, never in the body.
func (c Call) Stream() bool { return c.Method == MethodStream }

// Parse reads path as /{version}/models/{model}:{method}; ok is false for
// any other path. The version is one of Gemini's (v1, v1beta, v1alpha, …;
// see Versioned); the model is one path segment.
func Parse(path []byte) (c Call, ok bool) {
	version, rest, ok := cutVersion(path)
	if !ok {
		return Call{}, false
	}
	rest, ok = bytes.CutPrefix(rest, []byte("/models/"))
	if !ok {
		return Call{}, false
	}
	model, method, ok := bytes.Cut(rest, []byte(":"))
	if !ok || len(model) == 0 || len(method) == 0 || bytes.IndexByte(model, '/') >= 0 || bytes.IndexByte(method, '/') >= 0 {
		return Call{}, false
	}
	return Call{Version: string(version), Model: string(model), Method: string(method)}, true
}

// Is reports whether path is Gemini's API: any path under a version only
// Gemini uses (/v1beta/…, /v1alpha/…, and uploads under /upload/v1beta/…),
// or a model's method under /v1 (/v1/models/{model}:{method}). Gemini's
// other /v1 paths (the model list) are the same as OpenAI's, and go where
// OpenAI's go.
func Is(path []byte) bool {
	path = bytes.TrimPrefix(path, []byte("/upload"))
	if v, _, ok := cutVersion(path); ok && string(v) != "v1" {
		return true
	}
	_, ok := Parse(path)
	return ok
}

// cutVersion splits /{version}/rest at the version segment, which must be
// Versioned: rest starts with "/" (or is empty).
func cutVersion(path []byte) (version, rest []byte, ok bool) {
	if len(path) < 2 || path[0] != '/' {
		return nil, nil, false
	}
	seg, _, _ := bytes.Cut(path[1:], []byte("/"))
	if !Versioned(seg) {
		return nil, nil, false
	}
	return seg, path[1+len(seg):], true
}

// Versioned reports whether seg is an API version segment as Google names
// them: v1, v1beta, v1alpha, v1beta2, v2 …
func Versioned(seg []byte) bool {
	if len(seg) < 2 || seg[0] != 'v' {
		return false
	}
	i := 1
	for i < len(seg) && '0' <= seg[i] && seg[i] <= '9' {
		i++
	}
	if i == 1 {
		return false
	}
	rest := seg[i:]
	for _, stage := range []string{"alpha", "beta"} {
		if r, ok := bytes.CutPrefix(rest, []byte(stage)); ok {
			rest = r
			break
		}
	}
	// The digits of the version came first: what is left may only be a
	// stage's number (v1beta2).
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
