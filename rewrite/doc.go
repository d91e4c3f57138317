// Package rewrite is ctxpress's per-request pipeline on the JSON body of a
// chat-completions request. It is pure: no network, no disk.
//
// A request goes through:
//
//   - Identify: which conversation is this? (headers, prompt_cache_key, or
//     a fingerprint of the conversation's opening).
//   - Rewrite: validate once, parse the messages (byte ranges into the body,
//     never a decode into structs), squash each tool result through the
//     configured squasher, replace superseded duplicate tool results by a
//     placeholder, and count tokens before and after.
//   - EnsureStreamUsage: ask a streamed request's upstream for usage.
//
// Rewrite only ever replaces the bytes of a tool result's content (or of a
// text part inside it): every other byte of the body, including fields
// ctxpress does not know (tools, response_format, vendor extensions) and
// key order, is copied as sent. Anything it does not understand is passed
// on unchanged.
//
// Prompt-cache stability: providers cache the longest unchanged prefix of a
// request, so the rewritten messages of turn N must be a byte-identical
// prefix of the rewritten turn N+1. Every step is a deterministic function
// of the body and the Config (no clocks, no randomness, no per-conversation
// state); the one exception is dedup, which rewrites an earlier result, and
// which is therefore only done when it saves at least DedupConfig.MinTokens.
//
// Tokens are counted by Counter.Count alone, with tiktoken encodings
// embedded in the binary; counts, squash results and per-message results
// are cached by content hash within Config.CacheBytes, so a turn costs
// about its new messages.
package rewrite
