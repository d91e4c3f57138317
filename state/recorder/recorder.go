package recorder

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/logline"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// recordQueue is how many turns may wait for the store. Past it a request
// waits for room, at most recordQueueWait (a burst the writer absorbs
// within a batch or two loses no turn), and only then is its record
// dropped (and said so): a store that far behind is failing, and the
// answer must not wait on it. It is long enough that under sustained load
// the writer's interval, not the queue, bounds a batch (a half-full queue
// cuts the gathering short, and every batch costs two disk syncs); the
// figures are in docs/measurements.md. The queue holds pointers, so its
// length costs 8 bytes a slot.
const (
	recordQueue     = 8192
	recordQueueWait = time.Second
)

// Turn is an answered turn as its conversation's record keeps it: what
// the writer folds into the record (applyTurn) and the journal holds.
type Turn struct {
	Key  state.Key
	Line state.LineRef // the line of history it extends
	// Model is the request's; TokensBefore and TokensAfter are calibrated
	// estimates (what the upstream will most likely count), RawAfter
	// tiktoken's count of what was forwarded, which calibrates.
	Model                     string
	TokensBefore, TokensAfter int
	RawAfter                  int
	Applied                   *state.ChainHash // the summary branch applied, nil when none
	// Dedups and Prunes are the forwarded body's (rewrite.Result.Dedups),
	// for the line's next request; Forwarded is false when ctxpress
	// answered the turn itself (/compact), which leaves the line's as
	// they were and costs nothing.
	Dedups    []history.DedupMark
	Prunes    []history.PruneMark
	Forwarded bool
	Compacted bool // this turn wrote a summary before it was forwarded
	Trigger   int
	// ServerHistory: the provider keeps the rest of the history, or
	// compacted the request at the client's asking, so the upstream's
	// count is not of what ctxpress counted and teaches no calibration.
	ServerHistory bool
	// RefusedWindow is the window, in the upstream's tokens, the upstream
	// showed by refusing the request as too long before it was rescued (0:
	// not refused): its line keeps it (history.Numbers.Window). Not
	// journaled: a crash before the turn is written loses it until the
	// next refusal.
	RefusedWindow int
	// Observed: observe mode forwarded the request as the client sent it;
	// the rest of the turn is what ctxpress would have sent (RawAfter is
	// then the count of what was sent, which calibrates).
	Observed bool
	Usage    wire.Usage // what the upstream reported
	At       time.Time  // when it was answered (queued): its time in the record
	seq      uint64     // its place among its key's queued turns (from 1)
	jseq     uint64     // its journal entry's seq (0: not journaled)

	// Edits are what the forwarded body did to the client's messages
	// (state.Turn.Edits), Title and Agent the conversation's
	// (state.Record.Name), for the dashboard. Not journaled: a crash
	// before the turn is written loses them, and nothing is decided by
	// them.
	Edits        []history.Edit
	Title, Agent string
}

// Recorder writes conversation records from one goroutine, off the request
// path.
type Recorder struct {
	store state.Store
	log   zerolog.Logger
	now   func() time.Time // the clock of turn times and warnings
	queue chan *Turn       // each read-only once queued: pending shares it
	// queueWait bounds a request's wait for room in a full queue.
	queueWait time.Duration
	// every is the shortest time between two writes while turns keep
	// coming (recordEvery); a slow write stretches it (writeInterval).
	every time.Duration
	// waiters counts callers of wait: while there are any, the writer
	// writes what is queued without waiting for its interval's end.
	waiters atomic.Int32
	// flush wakes a sleeping writer to write what is queued (askFlush).
	flush chan struct{}
	done  chan struct{}
	// written, when set, is told of each record written and whether the
	// turn opened its breaker (events, metrics).
	written func(rec state.Record, tripped bool)

	mu     sync.RWMutex
	closed bool // guarded by mu; set once the queue is closed

	pendingMu sync.Mutex
	// pending holds turns queued but not yet written, so the next request
	// of each line of a conversation, often sent the moment the previous
	// answer ends, still finds its line and the previous turn's usage and
	// calibration.
	pending map[state.Key]pendingTurns // guarded by pendingMu
	// gen counts the writer's batches begun and ended (odd: one is being
	// written), changed under pendingMu: read tells by it whether the
	// record it read may or may not hold turns still pending.
	gen atomic.Uint64
	// wrote is signalled, on pendingMu, when a batch is written.
	wrote *sync.Cond
	// written is signalled, on pendingMu, when pending empties: every turn
	// queued is written (or lost). Not a WaitGroup: a streamed turn is
	// queued once its client has read the answer's end, so wait may
	// already be waiting when it is queued (a WaitGroup forbids that).
	allWritten *sync.Cond
	// answering counts turns being answered that will be queued (record)
	// or given up (answered) when their exchange ends: a streamed turn
	// ends after its client has read the answer's last event, so the
	// client's next step (a WaitIdle) can come before it is queued.
	answering atomic.Int64

	warn logline.Limiter
	// OnStoreFailure counts a failed write (metrics); nil: none.
	OnStoreFailure func(op string)

	// journal, when the store keeps one, has each turn before its answer
	// is sent, until a transaction writes it (state.Journaled): a crash
	// then loses no turn answered. seqs follows which are written.
	journal     state.Journaled
	seqs        journalSeqs
	journalWarn logline.Limiter
}

// wait blocks until every turn being answered or queued so far is written
// (or lost), which it asks for at once rather than at the end of the
// writer's interval.
func (r *Recorder) Wait() {
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	for len(r.pending) > 0 || r.answering.Load() > 0 {
		r.askFlush() // again for a turn queued while this waited
		r.allWritten.Wait()
	}
}

// answer counts a turn being answered, which its exchange's end queues
// (record) or gives up, and then says so (answered).
func (r *Recorder) Answer() { r.answering.Add(1) }

// answered ends a turn that answer counted, after its record was queued
// or given up.
func (r *Recorder) Answered() {
	if r.answering.Add(-1) > 0 {
		return
	}
	r.pendingMu.Lock()
	if len(r.pending) == 0 {
		r.allWritten.Broadcast()
	}
	r.pendingMu.Unlock()
}

// New returns a recorder writing to store from its own goroutine: now is
// the clock of turn times and warnings, written (nil: none) is told of
// each record written and whether the turn opened its breaker. Turns a
// journal holds from a previous run are written first.
func New(store state.Store, log zerolog.Logger, now func() time.Time, written func(state.Record, bool)) *Recorder {
	return newRecorderSized(store, log, now, written, recordQueue, recordQueueWait, recordEvery)
}

// NewStopped is New without its writer: its turns stay queued until the
// caller writes them (WriteQueued), for a test that orders the writes
// against the requests.
func NewStopped(store state.Store, log zerolog.Logger, now func() time.Time, written func(state.Record, bool)) *Recorder {
	return newStoppedRecorder(store, log, now, written, recordQueue, recordQueueWait, 0)
}

// WriteQueued writes the n oldest queued turns (all: n < 0) in one batch,
// as the writer of a stopped recorder would.
func (r *Recorder) WriteQueued(n int) {
	var batch []*Turn
	for n != 0 && len(r.queue) > 0 {
		batch = append(batch, <-r.queue)
		n--
	}
	if len(batch) > 0 {
		r.write(batch)
	}
}

// newRecorderSized is newRecorder with its queue's length, longest wait
// for room and shortest interval between writes.
func newRecorderSized(store state.Store, log zerolog.Logger, now func() time.Time, written func(state.Record, bool),
	queue int, wait, every time.Duration) *Recorder {
	r := newStoppedRecorder(store, log, now, written, queue, wait, every)
	go r.run()
	return r
}

// newStoppedRecorder is newRecorderSized without its writer: the caller
// runs it (a test, writing when it chooses).
func newStoppedRecorder(store state.Store, log zerolog.Logger, now func() time.Time, written func(state.Record, bool),
	queue int, wait, every time.Duration) *Recorder {
	r := &Recorder{store: store, log: log, now: now, queue: make(chan *Turn, queue), queueWait: wait, done: make(chan struct{}),
		every: every, flush: make(chan struct{}, 1), pending: map[state.Key]pendingTurns{}, written: written}
	r.allWritten = sync.NewCond(&r.pendingMu)
	r.wrote = sync.NewCond(&r.pendingMu)
	if j, ok := store.(state.Journaled); ok {
		r.journal = j
		r.replay(j.Unjournaled())
	}
	return r
}

func (r *Recorder) Record(tr Turn) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return
	}
	queued := &tr // one copy, for the queue and the pending lines alike
	queued.At = r.now()
	if r.journal != nil {
		queued.jseq = r.journalTurn(queued)
	}
	r.pendingMu.Lock()
	r.queueLocked(queued)
	r.pendingMu.Unlock()
	select {
	case r.queue <- queued:
		if len(r.queue) > cap(r.queue)/2 {
			r.askFlush() // before a request has to wait for room
		}
		return
	default:
	}
	r.askFlush()
	wait := time.NewTimer(r.queueWait)
	defer wait.Stop()
	select {
	case r.queue <- queued:
	case <-wait.C:
		r.done1(queued)
		r.seqs.done(queued.jseq)
		r.failed("record queue full; turn not recorded", nil)
	}
}

// maxRecordBatch bounds how many queued turns one transaction writes: the
// queue's length, so a full gather empties the queue.
const maxRecordBatch = recordQueue

// recordEvery is the shortest time from one of the writer's transactions
// to the next while turns keep coming. A busy proxy then writes each
// conversation once per interval with all of its turns (a record decoded,
// encoded and put once, one disk sync for them all) instead of once per
// turn; the turns in between are still seen by every request (read). A
// SIGKILL loses none of them where the store keeps a journal (the next
// start writes them), else at most the last interval's and a write's.
const recordEvery = 10 * time.Millisecond

// Under sustained load the interval stretches so that writing takes at
// most 1/writeShare of the writer's time: a write that took d is followed
// by at least writeShare×d of gathering, up to recordEveryMost: under
// sustained load a writer on a fixed interval takes much of the proxy's
// CPU (docs/measurements.md), while light traffic writes fast and keeps
// recordEvery (and so, without a journal, the SIGKILL window).
const (
	writeShare      = 20
	recordEveryMost = 100 * time.Millisecond
)

// writeInterval is the gathering interval after a write that took took,
// for a shortest interval every and a longest most.
func writeInterval(took, every, most time.Duration) time.Duration {
	return max(every, min(writeShare*took, most))
}

// longestInterval is how far a shortest interval every may stretch:
// recordEveryMost, or every when that is longer or 0 (a test's writer
// that never waits).
func longestInterval(every time.Duration) time.Duration {
	if every == 0 {
		return 0
	}
	return max(every, recordEveryMost)
}

// gatherUntil is until when the writer, holding turns to write, waits for
// more: interval after its previous transaction began. A turn after a
// quiet interval is written at once (the result is not after now).
func gatherUntil(lastWrite, now time.Time, interval time.Duration) time.Time {
	if due := lastWrite.Add(interval); due.After(now) {
		return due
	}
	return now
}

// run writes queued turns, all that came in an interval in one
// transaction (gatherUntil): one disk sync and one write per conversation
// per batch, so the writer keeps up with tens of thousands of turns a
// second.
func (r *Recorder) run() {
	defer close(r.done)
	batch := make([]*Turn, 0, maxRecordBatch)
	wake := time.NewTimer(time.Hour)
	wake.Stop()
	var lastWrite time.Time
	interval, most := r.every, longestInterval(r.every)
	for tr := range r.queue {
		batch = append(batch[:0], tr)
		batch = r.gather(batch, gatherUntil(lastWrite, time.Now(), interval), wake)
		lastWrite = time.Now()
		r.write(batch)
		interval = writeInterval(time.Since(lastWrite), r.every, most)
	}
}

// gather returns batch with the turns queued until until: the writer
// sleeps meanwhile instead of waking for every turn (a wake-up costs more
// than taking the turn), unless someone waits for the turns; a flush (a
// waiter, the queue half full or closed) ends the sleep early.
func (r *Recorder) gather(batch []*Turn, until time.Time, wake *time.Timer) []*Turn {
	if wait := time.Until(until); wait > 0 && r.waiters.Load() == 0 {
		wake.Reset(wait)
		select {
		case <-wake.C:
		case <-r.flush:
			wake.Stop()
		}
	}
	for len(batch) < maxRecordBatch {
		select {
		case next, ok := <-r.queue:
			if !ok {
				return batch
			}
			batch = append(batch, next)
		default:
			return batch
		}
	}
	return batch
}

// askFlush asks the writer to write what is queued now.
func (r *Recorder) askFlush() {
	select {
	case r.flush <- struct{}{}:
	default: // asked already
	}
}

// write stores a batch in one UpdateMany with one mutation per
// conversation: its turns of the batch applied in order, so a
// conversation answered several times since the last write is decoded,
// encoded and written once.
func (r *Recorder) write(batch []*Turn) {
	r.writeBatch(batch, true)
}

// writeBatch is write, telling written of each record when notify. With a
// journal, its transaction marks the batch's turns written.
func (r *Recorder) writeBatch(batch []*Turn, notify bool) {
	opened := make([]bool, len(batch))
	// after[i] is the record as turn i left it, for written: the last
	// turn of its Turns is turn i's.
	after := make([]state.Record, len(batch))
	groups := groupByKey(batch)
	muts := make([]state.Mutation, len(groups))
	for g, idx := range groups {
		muts[g] = state.Mutation{Key: batch[idx[0]].Key, At: batch[idx[len(idx)-1]].At, Fn: func(rec *state.Record) error {
			applyTurns(rec, batch, idx, opened, after)
			return nil
		}}
	}
	var recs []state.Record
	var errs []error
	var err error
	r.writing(batch, groups)
	if r.journal != nil {
		recs, errs, err = r.journal.UpdateManyThrough(muts, r.seqs.doneAll(batch))
	} else {
		recs, errs, err = r.store.UpdateMany(muts)
	}
	r.doneBatch(batch, groups)
	for g, idx := range groups {
		for _, i := range idx {
			switch {
			case err != nil:
				r.failed("cannot write the conversation record", err)
			case errs[g] != nil:
				r.failed("cannot write the conversation record", errs[g])
			case notify && r.written != nil:
				rec := after[i]
				rec.Key, rec.CreatedAt, rec.UpdatedAt = recs[g].Key, recs[g].CreatedAt, recs[g].UpdatedAt
				r.written(rec, opened[i])
			}
		}
	}
}

// groupByKey returns the indexes of batch's turns grouped by conversation,
// the groups in the order of their first turn, each in queue order.
func groupByKey(batch []*Turn) [][]int {
	var groups [][]int
	at := make(map[state.Key]int, len(batch))
	for i, tr := range batch {
		g, ok := at[tr.Key]
		if !ok {
			g = len(groups)
			at[tr.Key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

func (r *Recorder) failed(msg string, err error) {
	if r.OnStoreFailure != nil && err != nil {
		r.OnStoreFailure("write")
	}
	r.warn.Warn(r.now(), r.log, msg, err)
}

// close stops taking turns and waits until the queued ones are written.
func (r *Recorder) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
		r.askFlush()
	}
	r.mu.Unlock()
	<-r.done
}
