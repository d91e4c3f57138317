// Package compactor is ctxpress's summariser: it decides which messages of a
// conversation to fold into a summary, serialises them for the summary model,
// makes the one upstream summary call and renders the summary block that
// replaces them.
//
// Everything here is a pure function of its arguments except
// Summarizer.Summarize, which makes one HTTP call. The package knows nothing
// about routing, persistence or request bodies beyond ValidateChat; the
// rewrite package converts its parsed messages to Message and applies the
// result.
//
// A compaction, step by step:
//
//   - Cut picks [from, cut): the messages after the current summary's
//     coverage, minus a raw tail (KeepRecent messages and KeepRecentTokens
//     tokens). A latest user message older than the tail is summarised and
//     also sent verbatim after the summary (LatestUserIn). The cut never separates an
//     assistant's tool_calls from their tool results.
//   - TranscriptBudget says how many characters of transcript fit the summary
//     model's window; Transcript serialises the messages with labels,
//     redacts secrets (Redact) and truncates long bodies head+tail.
//   - BuildPrompt wraps the transcript in the preamble and the 13-section
//     template, feeding the previous summary back for an iterative update
//     (one summary, never a summary of summaries).
//   - Summarizer.Summarize sends it in the model's ParamRules (RulesFor:
//     temperature 0.3 and max_tokens DefaultMaxTokens, or for OpenAI's
//     reasoning models max_completion_tokens and no temperature), and
//     sends it again without a parameter the upstream refuses
//     (RefusesParam), remembering that for the model.
//     IsContextOverflow classifies an upstream's "too long" answer.
//   - SeedActiveTask pins the latest user ask at the top of "## Active Task";
//     Block renders the <conversation_summary> block for the system message.
//   - TrimHistory is the history limit without a summary, cut in blocks so
//     the prompt cache holds between two trims.
//   - ValidateChat checks that the compacted request is still one a strict
//     server accepts (tool calls paired with results, a user message, no
//     orphan first message); ValidateAlternation the role order strict chat
//     templates require.
//
// "Chars" in this package are bytes of UTF-8 text; every cut lands on a rune
// boundary, so valid UTF-8 in gives valid UTF-8 out.
package compactor
