package proxy

import (
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/geminipath"
	"github.com/ctxpress/ctxpress/wire/gemini"
	"github.com/ctxpress/ctxpress/wire/messages"
)

// errClientGone stops a relay whose client closed its connection.
var errClientGone = errors.New("client disconnected")

// Error codes in the OpenAI-shaped replies, stable for scripts that match them.
const (
	codeBodyTooLarge = "body_too_large"
	codeBadRequest   = "bad_request"
)

// writeError answers the client in the OpenAI error shape: ctxpress's own
// endpoints (admin, metrics) answer so whatever the client. message must
// not hold secrets; it is prefixed with "ctxpress: " so users can tell a
// proxy fault from an upstream one.
func writeError(ctx *fasthttp.RequestCtx, status int, code, message string) {
	writeErrorAs(ctx, openAIShape, status, code, message)
}

// writeClientError answers a request for the upstream with one of
// ctxpress's own errors in the shape its client reads (errorShapeOf its
// path): an Anthropic client retries, and shows, an error it can parse.
func writeClientError(ctx *fasthttp.RequestCtx, status int, code, message string) {
	writeErrorAs(ctx, errorShapeOf(ctx.Path()), status, code, message)
}

func writeErrorAs(ctx *fasthttp.RequestCtx, shape errorShape, status int, code, message string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(shape(status, code, message))
}

// errorShape renders one of ctxpress's own errors (its HTTP status, its
// stable code, a message without secrets) in a wire format's error shape.
type errorShape func(status int, code, message string) []byte

// openAIShape is OpenAI's shape, {"error":{"message","type","code"}}, with
// type "ctxpress_error" and ctxpress's code.
func openAIShape(_ int, code, message string) []byte { return errorBody(code, message) }

// anthropicShape is Anthropic's shape, {"type":"error","error":{"type",
// "message"}}, the type the status has in Anthropic's API; the code has no
// place there.
func anthropicShape(status int, _, message string) []byte { return messages.ErrorBody(status, message) }

// googleShape is Google's shape, {"error":{"code","message","status"}},
// the status name Google gives the HTTP status; the code has no place
// there.
func googleShape(status int, _, message string) []byte { return gemini.ErrorBody(status, message) }

// errorShapeOf is the error shape of a client on path: its conversation
// API's (apiOf), Anthropic's on every other Messages path
// (/v1/messages/count_tokens, /v1/messages/batches), Google's on every
// other Gemini path (countTokens, the model list); OpenAI's else.
func errorShapeOf(path []byte) errorShape {
	switch a := apiOf(path); {
	case a != nil:
		return a.errors
	case messagesPath(path):
		return anthropicShape
	case geminipath.Is(path):
		return googleShape
	}
	return openAIShape
}

// errorBody renders {"error":{"message","type","code"}}.
func errorBody(code, message string) []byte {
	type detail struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{"ctxpress: " + message, "ctxpress_error", code}})
	return b
}
