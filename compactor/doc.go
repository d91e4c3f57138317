// Package compactor is ctxpress's summariser logic: it decides which
// messages of a conversation to fold into a summary, serialises them for the
// summary model, writes the prompt and renders the summary block that
// replaces them.
//
// Everything here is a pure function of its arguments: the summary call
// itself is the shell's (proxy), spoken in the summariser's wire format
// by that format's adapter, which gets the prompt and the cap from the
// shell in a wire.SummaryCall. The package knows nothing about routing,
// persistence or request bodies; the rewrite package converts its parsed
// messages to Message and applies the result.
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
//     redacts secrets (redact.Secrets) and truncates long bodies head+tail.
//   - BuildPromptFor wraps the transcript in the preamble and the 13-section
//     template, feeding the previous summary back for an iterative update
//     (one summary, never a summary of summaries). NewSummary does both
//     steps for one call; Summary.Halved is the smaller prompt of the one
//     retry after the summariser refused the first as too long.
//   - HistoryPrompt is the other form of the summary call's prompt: the
//     instruction appended to the conversation itself, when the summariser
//     is the conversation's own upstream and model (its prompt cache then
//     holds the history); it names where the kept part begins and asks
//     for a previous summary block in the history to be folded in.
//   - Finish (SeedActiveTask, redact.Secrets) pins the latest user ask at
//     the top of "## Active Task"; Block renders the <conversation_summary> block
//     for the system message.
//   - TrimHistory is the history limit without a summary, cut in blocks so
//     the prompt cache holds between two trims.
//
// "Chars" in this package are bytes of UTF-8 text; every cut lands on a rune
// boundary, so valid UTF-8 in gives valid UTF-8 out.
package compactor
