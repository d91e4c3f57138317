// Package compaction is ctxpress's compaction engine: it carries out what
// rewrite plans. It makes the one summary call (Summarizer: each format's
// body and answer, the form that continues the forwarded history or the
// transcript form, the parameters an upstream refused), stores the
// summary as a branch (or a prepared one, sent from a fixed later turn),
// backs a line off after a failure, keeps one compaction per line at a
// time (a lease in the store across replicas), and keeps summary calls
// and live requests to a local model server apart (Gate). When to compact
// and how much is rewrite's to decide (rewrite.Policy).
package compaction
