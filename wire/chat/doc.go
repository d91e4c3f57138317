// Package chat is the wire adapter of OpenAI chat completions
// (POST /v1/chat/completions): what ctxpress reads and writes in that
// format and nothing else:
//
//   - the request as a neutral conversation (Format, a wire.Format): Parse
//     reads `messages` into messages and items with byte spans (a
//     system/developer, user or assistant message is one text item, an
//     assistant's tool_calls and legacy function_call follow as call items,
//     a tool or function message is one result item); the counting rules
//     (framing, role, name, ids, calls, parts) and the edits (dedup
//     placeholder, additions to the system prompt, merge into a user
//     message, new messages, cuts), written in place;
//   - usage: from a JSON answer (UsageFromJSON) and from SSE events
//     (SSEUsage); asking a stream for it (EnsureStreamUsage, StreamAsks,
//     StreamOptionsRefused) and taking the chunk ctxpress asked for out of
//     the client's stream again (UsageChunkFilter);
//   - the replies ctxpress writes itself (AssistantReply, e.g. to /compact);
//   - the summary call in this format (SummaryBody, ReadSummary), its
//     options spelt by wire.ParamRules.
//
// It knows no identities, records or policy; the shell (proxy) makes the
// calls, the core (rewrite, compactor) decides what goes in them.
package chat
