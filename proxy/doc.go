// Package proxy is ctxpress's HTTP shell: a fasthttp server that relays
// every request to its upstream through a pooled fasthttp client.
//
// Every method, path, query, header (hop-by-hop ones aside) and body is passed
// through; the status, headers and body of the answer come back as the upstream
// sent them, compressed bodies included. A text/event-stream answer is relayed
// read by read, flushed as it arrives, so no event is held back.
//
// The conversation endpoints (POST /v1/chat/completions, /v1/responses and
// /v1/messages, also without /v1, and Gemini's
// /v1beta/models/{model}:generateContent and :streamGenerateContent, also
// under /v1) are turns (handleTurn in turns.go): the
// turn package parses, identifies, plans, compacts and fits the request
// (turn.Turns.Begin), the shell forwards the body it gives, hands a
// refusal back to it (turn.Turn.Refused), reads the answer's usage (from
// the JSON body, or from a side copy of the SSE stream) and finishes the
// turn with it (finish). api.go says what differs per format. Every other
// path, /v1/responses/compact and /v1/responses/input_tokens included,
// passes through. The package never parses, rewrites or decides about
// message content itself. /ctxpress/ and /metrics are the admin
// package's.
//
// Faults ctxpress itself causes are answered in the error shape of the
// request's own format (OpenAI's for chat completions and Responses,
// Anthropic's for Messages, Google's for Gemini): 502 upstream unreachable or reset, 504 upstream
// timeout, 413 body too big, 401 a missing client key. An upstream error
// status is passed through unchanged.
package proxy
