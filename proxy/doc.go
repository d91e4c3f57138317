// Package proxy is ctxpress's HTTP front: a fasthttp server that relays every
// request to one OpenAI-compatible upstream through a pooled fasthttp client.
//
// Every method, path, query, header (hop-by-hop ones aside) and body is passed
// through; the status, headers and body of the answer come back as the upstream
// sent them, compressed bodies included. A text/event-stream answer is relayed
// read by read, flushed as it arrives, so no event is held back.
//
// POST /v1/chat/completions has its own handler: it reads the upstream's
// reported usage (from the JSON body, or from a side copy of the SSE stream)
// so later stages can calibrate their token estimates. The package never
// parses or rewrites message content itself; that is the rewrite package's job.
//
// Faults ctxpress itself causes are answered in the OpenAI error shape:
// 502 upstream unreachable or reset, 504 upstream timeout, 413 body too big.
// An upstream error status is passed through unchanged.
package proxy
