// Package rewrite is ctxpress's per-request pipeline over the neutral
// conversation (package wire) an adapter reads out of a request body; the
// adapter (wire/chat for chat completions, wire/responses, wire/messages
// for Anthropic Messages) is chosen by the caller (Parse,
// Config.Format) and writes the pipeline's edits back in place. It is
// pure: no network, no disk.
//
// A request goes through:
//
//   - Identify: which conversation is this? (headers, prompt_cache_key,
//     Claude Code's metadata.user_id session, or a fingerprint of the
//     conversation's opening).
//   - RewriteWith (Rewrite is RewriteWith without options; RewriteParsed
//     is it on a body Parse already read): validate once, read the
//     conversation through the adapter (byte ranges into the body, never a
//     decode into structs);
//     apply the longest stored summary (history.Branch) whose chain hash
//     matches the client's history, or else trim it to MaxHistoryMessages
//     (in blocks);
//     leave out a /compact command and ctxpress's reply to it; squash each
//     tool result that remains through the configured squasher (given the
//     call that produced it: name and arguments), replace
//     superseded duplicate tool results by a placeholder, prune the results
//     of earlier user turns to one line each (prune.go), add the summary
//     block and ConciseInstruction to the system prompt (or, per the
//     placement, to the head of the first user message), and count tokens
//     before and after.
//   - Result.Compaction: propose what a compaction of this request would
//     summarise (the cut, the compactor's view of the messages, the new
//     branch's chain hash, token estimates), from what RewriteWith already
//     parsed and counted.
//   - Decide (plan.go, observe.go): Policy.PlanTurn says whether a turn
//     compacts now, in the background, as a rescue or not at all, and why;
//     Policy.Size how much (hysteresis, min reclaim); Observe what the
//     upstream's reported usage means for the line's calibration and
//     breaker. Pure functions over plain values (package history's: the
//     caller stores them), the clock passed in. The
//     proxy executes: it calls the summariser and stores the branch; this
//     package does no I/O.
//
// Without a summary or a history limit, RewriteWith only ever replaces the
// bytes of a tool result's content (or of a text part inside it) and adds
// to the last leading system message: every other byte of the body,
// including fields ctxpress does not know (tools, response_format, vendor
// extensions) and key order, is copied as sent. A summary or the limit cuts
// whole messages out of the array and puts the re-sent latest user message
// in their place; with PlacementUser the block goes at the head of the
// first user message forwarded; the messages kept keep their bytes.
// Anything it does not understand is passed on unchanged.
//
// Chain hashes identify a history by content, not bytes (state.ChainHash):
// a client that re-serialises its messages still matches its summary, one
// that edits or rewinds them does not, and then gets no summary at all.
//
// Prompt-cache stability: providers cache the longest unchanged prefix of a
// request, so the rewritten messages of turn N must be a byte-identical
// prefix of the rewritten turn N+1. Every step is a deterministic function
// of the body and the Config (no clocks, no randomness, no per-conversation
// state but what the caller passes in Options); the exceptions are dedup,
// which rewrites an earlier result, and which is therefore only done when
// the dedups a request adds over the previous one's (Options.PrevDedups)
// save at least DedupConfig.MinTokens; pruning, which rewrites the results
// of earlier user turns once per user turn, on the request that opens it,
// when Options.Economics says it pays, and keeps them pruned from then on
// (Options.PrevPrunes); and the history limit, which trims a block at a
// time. A summary block, and the message it goes into, stay the same until
// the next compaction.
//
// Bound histories (wire.Conversation.Bound: Anthropic's thinking blocks,
// whose signature covers everything before them, bound.go): there dedup
// stubs the new repeat of an earlier result, never the earlier one, so
// every edit is a function of the history before it and a message once
// sent is sent alike on every later turn; after a summary or cut, the
// thinking of kept turns before the compaction's user ask is left out,
// and when kept messages still carry thinking the request asks the
// upstream to drop the blocks whose prefix changed (drop_block); after a
// prune batch, the thinking between its first result and the ask that
// decided it is left out, on that request and every later one. A
// standing instruction message (Claude Code's role:"system" message) that
// a summary covers moves, verbatim, to the end of the instructions.
//
// Tokens are counted by Counter.Count alone, with tiktoken encodings
// embedded in the binary; counts, squash results and per-message results
// are cached by content hash within Config.CacheBytes, so a turn costs
// about its new messages.
package rewrite
