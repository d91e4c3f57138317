// Package chat is the wire adapter of OpenAI chat completions
// (POST /v1/chat/completions): what ctxpress reads and writes in that
// format and nothing else. Today it speaks the summary call (SummaryBody,
// ReadSummary, the per-model ParamRules and RetryRules after a refusal) and
// reads an upstream's "too long" answer (IsContextOverflow, OverflowSize).
//
// It knows no identities, records or policy; the shell (proxy) makes the
// calls, the core (rewrite, compactor) decides what goes in them.
package chat
