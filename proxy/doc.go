// Package proxy is ctxpress's HTTP front: a fasthttp server that relays every
// request to one OpenAI-compatible upstream through a pooled fasthttp client.
//
// Every method, path, query, header (hop-by-hop ones aside) and body is passed
// through; the status, headers and body of the answer come back as the upstream
// sent them, compressed bodies included. A text/event-stream answer is relayed
// read by read, flushed as it arrives, so no event is held back.
//
// The conversation endpoints, POST /v1/chat/completions and POST
// /v1/responses (also without /v1), share one turn handler (handleTurn):
// the request is parsed by its format's wire adapter (api.go says what
// differs per format), identified, rewritten, compacted when due, forwarded,
// and the upstream's reported usage (from the JSON body, or from a side copy
// of the SSE stream) is recorded to calibrate later estimates. Every other
// path, /v1/responses/compact and /v1/responses/input_tokens included,
// passes through. The package never parses or rewrites message content
// itself; that is the wire and rewrite packages' job.
//
// Faults ctxpress itself causes are answered in the OpenAI error shape:
// 502 upstream unreachable or reset, 504 upstream timeout, 413 body too big.
// An upstream error status is passed through unchanged.
package proxy
