// Package chat is the wire adapter of OpenAI chat completions
// (POST /v1/chat/completions): what ctxpress reads and writes in that
// format and nothing else:
//
//   - usage: from a JSON answer (UsageFromJSON) and from SSE events
//     (SSEUsage); asking a stream for it (EnsureStreamUsage, StreamAsks,
//     StreamOptionsRefused) and taking the chunk ctxpress asked for out of
//     the client's stream again (UsageChunkFilter);
//   - the replies ctxpress writes itself (AssistantReply, e.g. to /compact);
//   - the summary call (SummaryBody, ReadSummary, the per-model ParamRules
//     and RetryRules after a refusal);
//   - an upstream's "too long" answer (IsContextOverflow, OverflowSize).
//
// Parsing a request into messages, editing it and placing the summary block
// are still in package rewrite (scan.go, messages.go, assemble.go).
//
// It knows no identities, records or policy; the shell (proxy) makes the
// calls, the core (rewrite, compactor) decides what goes in them.
package chat
