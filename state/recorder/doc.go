// Package recorder writes conversation records off the request path: an
// answered turn is queued (and journaled, when the store keeps a journal,
// so a crash loses none) and one goroutine folds batches of them into
// their records (the line's numbers through rewrite.Observe, the bill,
// the turn list). A request reads its record with the turns still queued
// folded in exactly as the writer will fold them (Read), so the writer's
// timing never changes what a request is judged by.
package recorder
