// Package replay replays recorded agent sessions turn by turn, once
// straight to a provider and once through ctxpress, and says what each
// costs: the tokens sent, the share the provider's prompt cache served,
// ctxpress's summary calls, and the bill at a model's prices. It is how a
// user decides whether ctxpress pays for them, and how ctxpress measures
// it (`ctxpress replay`).
//
// A session is read from what users have: a Claude Code transcript or a
// codex rollout, rebuilt into the requests the agent sent, one per model
// call (what the file does not record is filled in from the agent's own
// and said, Session.Approximated), or request bodies as recorded. Load
// reads directories recursively and tells a file by its content;
// DefaultSources are where the agents keep their sessions.
//
// The provider is by default a simulation (Sim) that caches exact
// prefixes per session, as OpenAI does: a request's cached tokens are those
// of the longest prefix of prompt elements (the model, each tool, then each
// message, input item or system block, compared in canonical form) it
// shares with an earlier request of the session, when that prefix is at
// least MinCachedPrefix tokens; on Messages it also reports the tokens
// after that up to the last cache_control marker as written to the cache,
// which Anthropic bills above an input token. It validates every body
// with the strict validators the tests use and refuses what the real API
// refuses. Or the provider is a real upstream, whose reported usage is
// read as it is.
//
// Every call to the provider goes through a meter, which reads its usage
// from the answer (JSON or SSE, in the call's format) and tells agent
// requests from ctxpress's summary calls by the summariser's instruction.
// The meter is the one place where tokens are counted, for both legs.
//
// This package is shell code: it listens on loopback, reads files and
// makes HTTP calls.
package replay
