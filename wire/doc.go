// Package wire is the neutral conversation the core (rewrite, compactor)
// works on, and the seam every wire-format adapter plugs into.
//
// An adapter (wire/chat for OpenAI chat completions, wire/responses for
// the Responses API, wire/messages for Anthropic Messages) implements Format: Parse turns a request body
// into a Conversation — messages in order, each holding items
// (instruction, user text, assistant text, tool call, tool result, opaque)
// with the byte spans of everything an edit may touch — and the other
// methods answer what depends on the format (how a message is counted,
// what a content says) and render the core's edits: replace an item's
// content, add to the instructions, put text at the head of a user
// message, replace or drop whole messages. The core splices those edits
// into the body (Splice); every other byte, unknown fields included, is
// copied as sent. wire/sse reads the event streams the adapters watch; it
// is a helper they share, not an adapter.
//
// The package also holds the JSON tools the adapters share: a scanner
// over JSON known to be valid (SkipSpace, ValueEnd, WalkArray,
// WalkObject), AppendJSONString and the canonical form chain hashes and
// dedup keys are built on (AppendCanonical); and what any format's upstream
// may answer alike: that a request is longer than the model's window
// (IsContextOverflow, OverflowSize).
//
// The summary call is shared too: each adapter builds its body and reads
// its answer in its own format, from the types and rules here —
// SummaryCall and Summary, the options a model takes (ParamRules:
// RulesFor, RetryRules after a refusal), the errors an answer can be
// (CheckSummaryAnswer, ErrUpstream, ErrEmptySummary, …) and the edits of
// a history call's top-level members (EditTop, DropArrayElements). So no
// adapter imports another, and none imports the compactor: the caller
// passes the prompt and the cap in SummaryCall. So is a tool ctxpress
// answers itself (Tools: its definition added to a request's tools, the
// calls of an answer whole or streamed, the answer's turn and the results
// appended to ask again). It does no I/O.
package wire
