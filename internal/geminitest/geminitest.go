// Package geminitest checks a Gemini API generateContent request the way
// generativelanguage.googleapis.com enforces it, for tests: a fake upstream
// built on it refuses what Google refuses, with the same status and the
// same error body, {"error":{"code":400,"message":…,"status":"INVALID_ARGUMENT"}}.
//
// Rules (the API's wording where it was seen in reports, see contents.go):
//   - the body is proto JSON: a field may be spelled lowerCamel or
//     snake_case, an unknown one is refused (`Unknown name "x"`) at the
//     top, in contents, parts, function calls and responses,
//     generationConfig and thinkingConfig; a thinking level Google does not
//     know, or a level with a budget, is refused;
//   - contents not empty, roles user and model only, no content without
//     parts, every part holding one data field (or only a signature, as
//     Google's SDKs send a streamed text's last part back); a call's args
//     and a response's response are objects (protobuf Structs);
//   - a model content with functionCall parts comes after a user content,
//     and the very next content answers each call with a functionResponse
//     part (by id when the call has one, else by name in order) before any
//     other user content;
//   - with signatures required (Gemini 3 models): in the current turn (the
//     contents after the last user content that is not a function
//     response) the first functionCall part of each model step carries a
//     thoughtSignature; with a Ledger, every signature sent back is one the
//     upstream issued, on the part it was issued on, byte for byte
//     ("Corrupted thought signature."), and with BindPrefix after the
//     prompt it was issued after.
//
// Server (server.go) answers like the API: JSON, SSE with alt=sse, a JSON
// array streamed without it, countTokens, the model list, and a key
// required in x-goog-api-key or ?key=.
package geminitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Error is a request the API refuses: the HTTP status, Google's status
// name and the message.
type Error struct {
	Code    int
	Status  string // INVALID_ARGUMENT, PERMISSION_DENIED, ...
	Message string
}

func (e *Error) Error() string { return e.Status + ": " + e.Message }

// Body is the error as the API answers it.
func (e *Error) Body() []byte {
	type inner struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ") // Google indents its error bodies
	_ = enc.Encode(struct {
		Error inner `json:"error"`
	}{inner{e.Code, e.Message, e.Status}})
	return b.Bytes()
}

// Write answers w with the error.
func (e *Error) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.Code)
	_, _ = w.Write(e.Body())
}

// invalid is a 400 INVALID_ARGUMENT.
func invalid(format string, args ...any) *Error {
	return &Error{Code: http.StatusBadRequest, Status: "INVALID_ARGUMENT", Message: fmt.Sprintf(format, args...)}
}

// Options say how strict Check is.
type Options struct {
	// Signatures requires the current turn's thought signatures, as
	// Gemini 3 models do (RequiresSignatures).
	Signatures bool
	// Ledger holds the signatures the upstream issued; nil accepts any
	// signature that is present.
	Ledger *Ledger
	// BindPrefix refuses a signature sent after another prompt
	// (systemInstruction, tools and the contents before its own) than the
	// one its answer was produced after. Google does not document such a
	// check; this is the strictest reading, for rewrites that must leave
	// every kept signature's prefix as it was.
	BindPrefix bool
	// CountTokens checks a countTokens body: contents alone, or a whole
	// request under generateContentRequest; no signature checks.
	CountTokens bool
}

// RequiresSignatures reports whether model refuses a current turn's
// function call without its thought signature: the Gemini 3 family.
func RequiresSignatures(model string) bool {
	return strings.HasPrefix(strings.TrimPrefix(model, "models/"), "gemini-3")
}

// Request is what Check read from a valid request.
type Request struct {
	Contents int
	Tools    []Tool
	// LastUser is the text of the last user content that has text.
	LastUser string
	// CurrentTurn is the index of the content the current turn opens with
	// (the last user content that is no function response).
	CurrentTurn int
	// IncludeThoughts: generationConfig.thinkingConfig.includeThoughts.
	IncludeThoughts bool
	// Prompt is what a model prefills, in order: systemInstruction, tools,
	// then each content, each piece's raw bytes on a line of its own;
	// Parts are the pieces' lengths.
	Prompt []byte
	Parts  []int
	// Signed is how many signatures sent back were checked and accepted.
	Signed int
}

// Tool is one function declaration the request offers.
type Tool struct {
	Name   string
	Schema map[string]any // parameters or parametersJsonSchema
}

// topKeys are GenerateContentRequest's fields, by their lowerCamel name.
var topKeys = map[string]bool{
	"model": true, "contents": true, "tools": true, "toolConfig": true, "safetySettings": true,
	"systemInstruction": true, "generationConfig": true, "cachedContent": true, "labels": true,
	"serviceTier": true, "store": true,
}

// Check reads body as a generateContent request and returns what it holds,
// or the error the API would answer it with.
func Check(body []byte, o Options) (*Request, *Error) {
	top, err := object(body)
	if err != nil {
		return nil, invalid("Invalid JSON payload received. %v", err)
	}
	if o.CountTokens {
		if inner, ok := top["generateContentRequest"]; ok {
			if top, err = object(inner); err != nil {
				return nil, invalid("Invalid JSON payload received. %v", err)
			}
		} else {
			for k := range top {
				if k != "contents" {
					return nil, invalid("Invalid JSON payload received. Unknown name %q: Cannot find field.", k)
				}
			}
		}
	}
	for _, k := range sortedKeys(top) {
		if !topKeys[k] {
			return nil, invalid("Invalid JSON payload received. Unknown name %q: Cannot find field.", k)
		}
	}
	r := &Request{}
	r.piece(top["systemInstruction"])
	if err := readTools(top["tools"], r); err != nil {
		return nil, err
	}
	if err := readGeneration(top["generationConfig"], r); err != nil {
		return nil, err
	}
	cs, cerr := readContents(top["contents"])
	if cerr != nil {
		return nil, cerr
	}
	for _, c := range cs {
		r.piece(c.Raw)
	}
	r.Contents = len(cs)
	r.CurrentTurn = currentTurn(cs)
	r.LastUser = lastUserText(cs)
	if err := pairing(cs); err != nil {
		return nil, err
	}
	if o.CountTokens {
		return r, nil
	}
	if o.Signatures {
		if err := missingSignatures(cs, r.CurrentTurn); err != nil {
			return nil, err
		}
	}
	if o.Ledger != nil {
		n, err := o.Ledger.verify(cs, r, o.BindPrefix)
		if err != nil {
			return nil, err
		}
		r.Signed = n
	}
	return r, nil
}

// object reads a JSON object, its keys turned to lowerCamel as proto JSON
// accepts either spelling.
func object(raw []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(raw))
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("expected an object")
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[camel(k)] = v
	}
	return out, nil
}

// camel turns a snake_case field name into lowerCamel.
func camel(k string) string {
	if !strings.Contains(k, "_") {
		return k
	}
	var b strings.Builder
	up := false
	for _, c := range k {
		switch {
		case c == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(c)))
			up = false
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// piece appends raw to the prompt as one piece.
func (r *Request) piece(raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	r.Prompt = append(append(r.Prompt, raw...), '\n')
	r.Parts = append(r.Parts, len(raw)+1)
}

func readTools(raw json.RawMessage, r *Request) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return invalid("Invalid JSON payload received. Unknown name \"tools\": Proto field is not repeating, cannot start list.")
	}
	r.piece(raw)
	for i, t := range tools {
		tm, err := object(t)
		if err != nil {
			return invalid("Invalid value at 'tools[%d]' (type.googleapis.com/google.ai.generativelanguage.v1beta.Tool)", i)
		}
		var decls []json.RawMessage
		_ = json.Unmarshal(tm["functionDeclarations"], &decls)
		for j, d := range decls {
			dm, err := object(d)
			if err != nil {
				return invalid("Invalid value at 'tools[%d].function_declarations[%d]'", i, j)
			}
			var name string
			_ = json.Unmarshal(dm["name"], &name)
			if name == "" {
				return invalid("* GenerateContentRequest.tools[%d].function_declarations[%d].name: Name cannot be empty.\n", i, j)
			}
			var schema map[string]any
			if json.Unmarshal(dm["parametersJsonSchema"], &schema) != nil || schema == nil {
				_ = json.Unmarshal(dm["parameters"], &schema)
			}
			r.Tools = append(r.Tools, Tool{Name: name, Schema: lowerTypes(schema)})
		}
	}
	return nil
}

// lowerTypes turns an OpenAPI schema's upper-case types (STRING, OBJECT)
// into JSON Schema's, recursively, so one reader serves both spellings.
func lowerTypes(s map[string]any) map[string]any {
	for k, v := range s {
		switch v := v.(type) {
		case string:
			if k == "type" {
				s[k] = strings.ToLower(v)
			}
		case map[string]any:
			lowerTypes(v)
		}
	}
	return s
}

// generationKeys are GenerationConfig's fields, thinkingKeys
// ThinkingConfig's; thinkingLevels the levels Gemini 3 takes.
var (
	generationKeys = map[string]bool{"stopSequences": true, "responseMimeType": true, "responseSchema": true,
		"responseJsonSchema": true, "_responseJsonSchema": true, "responseModalities": true, "candidateCount": true,
		"maxOutputTokens": true, "temperature": true, "topP": true, "topK": true, "seed": true, "presencePenalty": true,
		"frequencyPenalty": true, "responseLogprobs": true, "logprobs": true, "enableEnhancedCivicAnswers": true,
		"speechConfig": true, "thinkingConfig": true, "imageConfig": true, "mediaResolution": true, "routingConfig": true,
		"audioTimestamp": true, "enableAffectiveDialog": true, "modelSelectionConfig": true}
	thinkingKeys   = map[string]bool{"includeThoughts": true, "thinkingBudget": true, "thinkingLevel": true}
	thinkingLevels = map[string]bool{"MINIMAL": true, "LOW": true, "MEDIUM": true, "HIGH": true, "THINKING_LEVEL_UNSPECIFIED": true}
)

// readGeneration checks generationConfig's fields and reads whether
// thoughts are included.
func readGeneration(raw json.RawMessage, r *Request) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	gc, err := object(raw)
	if err != nil {
		return invalid("Invalid JSON payload received. Invalid value at 'generation_config': %v", err)
	}
	for _, k := range sortedKeys(gc) {
		if !generationKeys[k] {
			return invalid("Invalid JSON payload received. Unknown name %q at 'generation_config': Cannot find field.", k)
		}
	}
	raw, ok := gc["thinkingConfig"]
	if !ok {
		return nil
	}
	tc, err := object(raw)
	if err != nil {
		return invalid("Invalid JSON payload received. Invalid value at 'generation_config.thinking_config': %v", err)
	}
	for _, k := range sortedKeys(tc) {
		if !thinkingKeys[k] {
			return invalid("Invalid JSON payload received. Unknown name %q at 'generation_config.thinking_config': Cannot find field.", k)
		}
	}
	_, budget := tc["thinkingBudget"]
	if level, ok := tc["thinkingLevel"]; ok {
		var l string
		if json.Unmarshal(level, &l) != nil || !thinkingLevels[strings.ToUpper(l)] {
			return invalid("Invalid value at 'generation_config.thinking_config.thinking_level' (type.googleapis.com/google.ai.generativelanguage.v1beta.ThinkingConfig.ThinkingLevel), %s", level)
		}
		if budget {
			return invalid("You can only set only one of thinking budget and thinking level.")
		}
	}
	_ = json.Unmarshal(tc["includeThoughts"], &r.IncludeThoughts)
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
