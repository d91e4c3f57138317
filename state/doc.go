// Package state persists what ctxpress knows about each conversation between
// requests and across restarts: summary branches, the last upstream-reported
// input tokens and ctxpress's own estimate for that request, the calibration
// between the two, the compaction breaker, counters, recent summaries and a
// short per-turn history.
//
// Callers see only the [Store] interface and plain Go values ([Record],
// [Branch], [Key]). Three implementations exist:
//
//   - [OpenBolt]: an embedded bbolt file, the default. The file is created
//     with mode 0600; records live in the "conversations" bucket, a schema
//     version in the "meta" bucket. Only one process can open the file for
//     writing at a time.
//   - [NewMemory]: a map in memory, for running without a database and for
//     tests. It behaves exactly like the bolt store (same encoding, same
//     ordering, same retention) but forgets everything on exit.
//   - [OpenRedis]: a Redis that several replicas share. Each record is a
//     key (prefix "r:" namespace NUL id) holding the same encoding, with a
//     TTL of the retention; a sorted set by UpdatedAt serves List; the
//     schema version sits beside them. Updates are optimistic
//     compare-and-set scripts, so concurrent replicas lose no update.
//
// # Keys and isolation
//
// A record is addressed by a [Key]: a namespace derived from the client's
// Authorization header ([Namespace]) and a conversation id. Records of one
// namespace are never returned for a key of another, so two API keys never
// see each other's conversations.
//
// # Updates
//
// [Store.Update] is an atomic read-modify-write: the function runs on the
// current record inside one write transaction, and the result is persisted
// only if the function returns nil. On Redis the function may run again, on
// the newer record, when another process wrote first; it must only change
// the record. The bookkeeping that every caller needs is
// provided as methods on [Record] ([Record.PutBranch], [Record.TouchBranch],
// [Record.MatchBranch], [Record.AddSummaryHistory], [Record.AddTurn]) so that
// the rules (at most [MaxBranches] branches, least recently used dropped; the
// last [MaxRecentSummaries] summaries; the last [MaxTurns] turns) live in one
// place.
//
// # Retention
//
// A record not updated for the store's retention period (default 30 days) is
// deleted by a background sweep that runs once at open and then every sweep
// interval (default 1 hour), and by an explicit [Store.Sweep]. [Store.Close]
// stops the sweep and waits for it.
//
// # Encoding
//
// Records are stored as JSON through a private on-disk struct, so renaming a
// Go field never breaks an existing database. Unknown fields are ignored on
// read, so an older binary can read a record written by a newer one that only
// added fields (it drops those fields when it rewrites the record). A change
// that older binaries cannot read bumps [SchemaVersion]; a binary refuses to
// open a database whose schema is newer than its own ([ErrSchemaTooNew]).
// The bolt file is at schema 2: a record's turns are kept apart from it
// (its newest in the record, the others in chunks of the turns bucket), so
// a turn does not rewrite the conversation's history; a schema 1 file is
// read, marked 2 when opened for writing, and each record moves its turns
// when next written.
package state
