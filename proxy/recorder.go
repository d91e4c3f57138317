package proxy

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/rs/zerolog"
)

// recordQueue is how many turns may wait for the store. Past it a request
// waits for room, at most recordQueueWait (a burst the writer absorbs
// within a batch or two loses no turn), and only then is its record
// dropped (and said so): a store that far behind is failing, and the
// answer must not wait on it. It is long enough that under sustained load
// the writer's interval, not the queue, bounds a batch: a half-full queue
// cuts the gathering short, and at 1,024 it did so every ~40 ms at 12k
// turns a second, where recordEveryMost allows 100 (two disk syncs per
// batch, each holding the writer's thread and, with one P, the whole
// proxy). The queue holds pointers, so its length costs 8 bytes a slot.
const (
	recordQueue     = 8192
	recordQueueWait = time.Second
)

// warnEvery rate-limits store-failure warnings: a broken disk is reported
// once per interval, not once per request.
const warnEvery = time.Minute

type turnRecord struct {
	turn  turn
	usage wire.Usage
	at    time.Time // when it was answered (queued): its time in the record
	seq   uint64    // its place among its key's queued turns (from 1)
	jseq  uint64    // its journal entry's seq (0: not journaled)
}

// recorder writes conversation records from one goroutine, off the request
// path.
type recorder struct {
	store state.Store
	log   zerolog.Logger
	now   func() time.Time // the clock of turn times and warnings
	queue chan *turnRecord // each read-only once queued: pending shares it
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

	warn warnLimiter
	// onStoreFailure counts a failed write (metrics); nil: none.
	onStoreFailure func(op string)

	// journal, when the store keeps one, has each turn before its answer
	// is sent, until a transaction writes it (state.Journaled): a crash
	// then loses no turn answered. seqs follows which are written.
	journal     state.Journaled
	seqs        journalSeqs
	journalWarn warnLimiter
}

// journalSeqs follows which journaled turns are written or given up, for
// the mark each transaction puts: the seq up to which all of them are.
// Turns are journaled in one order and may reach the queue in another.
type journalSeqs struct {
	mu      sync.Mutex
	through uint64
	ahead   map[uint64]bool // done, past through
}

// done counts the turn journaled as seq (0: none) as written or given up,
// and returns the mark.
func (p *journalSeqs) done(seq uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case seq == p.through+1:
		p.through++
		for p.ahead[p.through+1] {
			delete(p.ahead, p.through+1)
			p.through++
		}
	case seq > p.through:
		if p.ahead == nil {
			p.ahead = map[uint64]bool{}
		}
		p.ahead[seq] = true
	}
	return p.through
}

// wait blocks until every turn being answered or queued so far is written
// (or lost), which it asks for at once rather than at the end of the
// writer's interval.
func (r *recorder) wait() {
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
func (r *recorder) answer() { r.answering.Add(1) }

// answered ends a turn that answer counted, after its record was queued
// or given up.
func (r *recorder) answered() {
	if r.answering.Add(-1) > 0 {
		return
	}
	r.pendingMu.Lock()
	if len(r.pending) == 0 {
		r.allWritten.Broadcast()
	}
	r.pendingMu.Unlock()
}

// warnLimiter logs a recurring failure once per warnEvery, with how many
// happened since the last line.
type warnLimiter struct {
	last  atomic.Int64 // unix nanos of the last warning
	count atomic.Int64 // failures since the last warning
}

func (w *warnLimiter) warn(at time.Time, log zerolog.Logger, msg string, err error) {
	n := w.count.Add(1)
	now := at.UnixNano()
	last := w.last.Load()
	if now-last < int64(warnEvery) || !w.last.CompareAndSwap(last, now) {
		return
	}
	w.count.Store(0)
	log.Warn().Err(err).Int64("failures", n).Msg(msg)
}

func newRecorder(store state.Store, log zerolog.Logger, now func() time.Time, written func(state.Record, bool)) *recorder {
	return newRecorderSized(store, log, now, written, recordQueue, recordQueueWait, recordEvery)
}

// newRecorderSized is newRecorder with its queue's length, longest wait
// for room and shortest interval between writes.
func newRecorderSized(store state.Store, log zerolog.Logger, now func() time.Time, written func(state.Record, bool),
	queue int, wait, every time.Duration) *recorder {
	r := &recorder{store: store, log: log, now: now, queue: make(chan *turnRecord, queue), queueWait: wait, done: make(chan struct{}),
		every: every, flush: make(chan struct{}, 1), pending: map[state.Key]pendingTurns{}, written: written}
	r.allWritten = sync.NewCond(&r.pendingMu)
	if j, ok := store.(state.Journaled); ok {
		r.journal = j
		r.replay(j.Unjournaled())
	}
	go r.run()
	return r
}

// ReplayJournal writes to store the turns its journal holds that no
// transaction wrote (a crash's), for a process that opens the store to
// change it without serving (the conversations command): a conversation
// it forgets does not come back from the journal at the next start.
func ReplayJournal(store state.Store, log zerolog.Logger) {
	if _, ok := store.(state.Journaled); ok {
		newRecorder(store, log, time.Now, nil).close()
	}
}

// replay writes the turns journaled before the last exit that no
// transaction wrote (a crash's), before any request is served, so that
// the requests read records with them.
func (r *recorder) replay(entries []state.JournalEntry, through uint64) {
	r.seqs.through = through
	if len(entries) == 0 {
		return
	}
	batch := make([]*turnRecord, 0, len(entries))
	for _, e := range entries {
		tr, err := readJournalEntry(e.Payload)
		if err != nil {
			r.log.Warn().Uint64("seq", e.Seq).Err(err).Msg("journal entry not replayed")
			continue
		}
		tr.jseq = e.Seq
		batch = append(batch, &tr)
	}
	// One transaction, its mark through the last: none is replayed twice.
	r.writeBatch(batch, false)
	r.log.Info().Int("turns", len(batch)).Int("unreadable", len(entries)-len(batch)).
		Msg("recorded the turns answered before the last exit and not yet written (journal)")
}

// journalTurn journals tr, before its answer is sent, and returns its
// seq; 0 when the journal has no room (the turn is then kept as before
// there were journals: in memory until written).
func (r *recorder) journalTurn(tr *turnRecord) uint64 {
	bp := journalBufs.Get().(*[]byte)
	*bp = appendJournalEntry((*bp)[:0], tr)
	seq, err := r.journal.Journal(*bp)
	journalBufs.Put(bp)
	if err != nil {
		r.journalWarn.warn(r.now(), r.log, "cannot journal a turn; it is lost if ctxpress dies before it is written", err)
		return 0
	}
	return seq
}

// journalBufs are the buffers turns' entries are encoded in (the journal
// copies them).
var journalBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (r *recorder) record(tr turnRecord) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return
	}
	queued := &tr // one copy, for the queue and the pending lines alike
	queued.at = r.now()
	if r.journal != nil {
		queued.jseq = r.journalTurn(queued)
	}
	r.pendingMu.Lock()
	p := r.pending[tr.turn.key]
	p.n++
	p.seq++
	queued.seq = p.seq
	p.lines = p.lines.with(queued)
	r.pending[tr.turn.key] = p
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
		r.done1(tr.turn.key, 0)
		r.seqs.done(queued.jseq)
		r.failed("record queue full; turn not recorded", nil)
	}
}

// pendingTurns is what a request needs of its conversation's turns that are
// queued but not written yet: how many, and for each line they extend,
// what pendingLine keeps. Two histories under one key (runs of one agent,
// an app-wide id) each find their own line while the store is slow.
type pendingTurns struct {
	n     int
	seq   uint64 // the last queued turn's seq
	lines pendingLines
}

// pendingLines are the lines of a key's queued turns, in the order they
// were first queued.
type pendingLines []pendingLine

// pendingLine is what a line's queued turns tell its next request: the
// latest (where it took the line, its dedups), and the latest with usage
// (nil: none). Both are read-only once queued, so a request copies the
// pointers, not the turns.
type pendingLine struct {
	newest *turn
	usage  *turnRecord
	// earlier are the usages of the line's queued turns before usage's,
	// oldest first, and their seqs: the cost model counts every turn and
	// what each said of the cache, not only the latest. Those written are
	// dropped (sinceWritten): a busy key may never have none queued, and
	// its written turns are in the record already. tally sums them, so a
	// request folds them in at once however many a busy line has queued
	// (hundreds while the writer gathers under load).
	earlier    []rewrite.Usage
	earlierSeq []uint64
	tally      rewrite.UsageTally
}

// sinceWritten drops from l's earlier usages those of turns up to seq,
// which are written. Only the start moves: a copy of l (overlay) keeps
// reading what it saw, and appends go past its end.
func (l *pendingLine) sinceWritten(seq uint64) {
	n := 0
	for n < len(l.earlierSeq) && l.earlierSeq[n] <= seq {
		l.tally = l.tally.Remove(l.earlier[n])
		n++
	}
	l.earlier, l.earlierSeq = l.earlier[n:], l.earlierSeq[n:]
}

// with returns ls with queued on its line.
func (ls pendingLines) with(queued *turnRecord) pendingLines {
	i := slices.IndexFunc(ls, func(l pendingLine) bool { return l.newest.line.id == queued.turn.line.id })
	if i < 0 {
		ls, i = append(ls, pendingLine{}), len(ls)
	}
	ls[i].newest = &queued.turn
	if queued.usage.Found {
		if ls[i].usage != nil {
			u := cacheUsage(ls[i].usage.usage)
			ls[i].earlier = append(ls[i].earlier, u)
			ls[i].earlierSeq = append(ls[i].earlierSeq, ls[i].usage.seq)
			ls[i].tally = ls[i].tally.Add(u)
		}
		ls[i].usage = queued
	}
	return ls
}

// done1 counts one pending turn of key as written (its seq; 0: lost).
func (r *recorder) done1(key state.Key, seq uint64) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	r.doneLocked(key, 1, seq)
	r.wakeIfAllWritten()
}

// doneBatch counts a written batch's turns as done1 would one by one,
// under one lock rather than one per turn: requests wait on that lock
// (overlay, record), and each hand-off of it wakes a goroutine.
func (r *recorder) doneBatch(batch []*turnRecord, groups [][]int) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	for _, idx := range groups {
		var seq uint64
		for _, i := range idx {
			seq = max(seq, batch[i].seq)
		}
		r.doneLocked(batch[idx[0]].turn.key, len(idx), seq)
	}
	r.wakeIfAllWritten()
}

// doneLocked counts n pending turns of key as written, the latest seq;
// pendingMu is held.
func (r *recorder) doneLocked(key state.Key, n int, seq uint64) {
	if p := r.pending[key]; p.n > n {
		p.n -= n
		for i := range p.lines {
			p.lines[i].sinceWritten(seq)
		}
		r.pending[key] = p
	} else {
		delete(r.pending, key)
	}
}

// wakeIfAllWritten wakes wait's callers when no turn is pending any more;
// pendingMu is held.
func (r *recorder) wakeIfAllWritten() {
	if len(r.pending) == 0 && r.answering.Load() == 0 {
		r.allWritten.Broadcast()
	}
}

// overlay gives rec, a record just read from the store, the lines of key's
// turns that are queued but not yet written, with the usage and
// calibration of each line's latest: O(lines) however many are queued,
// under a short lock.
func (r *recorder) overlay(key state.Key, rec *state.Record) {
	// A copy (record changes them in place), on the stack for a key's
	// usual few lines.
	var few [4]pendingLine
	r.pendingMu.Lock()
	lines := append(few[:0], r.pending[key].lines...)
	r.pendingMu.Unlock()
	if len(lines) == 0 {
		return
	}
	now := r.now()
	// rec is the caller's copy, read from the store just now.
	e := lineEditor{rec: rec}
	for i := range lines {
		l := &lines[i]
		e.update(l.newest.line, now, lineEdit{dedupsOf: l.newest})
		if l.tally.Turns > 0 { // one edit: touching the line again changes nothing
			e.update(l.newest.line, now, lineEdit{caches: l.tally})
		}
		if l.usage != nil {
			tr := *l.usage
			tr.turn.compacted = false // the breaker is the writer's business
			e.update(tr.turn.line, now, lineEdit{observe: &tr})
		}
	}
}

// maxRecordBatch bounds how many queued turns one transaction writes: the
// queue's length, so a full gather empties the queue.
const maxRecordBatch = recordQueue

// recordEvery is the shortest time from one of the writer's transactions
// to the next while turns keep coming. A busy proxy then writes each
// conversation once per interval with all of its turns (a record decoded,
// encoded and put once, one disk sync for them all) instead of once per
// turn; the turns in between are still seen by every request (overlay). A
// SIGKILL loses none of them where the store keeps a journal (the next
// start writes them), else at most the last interval's and a write's.
const recordEvery = 10 * time.Millisecond

// Under sustained load the interval stretches so that writing takes at
// most 1/writeShare of the writer's time: a write that took d is followed
// by at least writeShare×d of gathering, up to recordEveryMost. At 14k
// turns a second over 64 conversations a write takes ~2 ms, and a writer
// at 10 ms was a sixth of the proxy's CPU; an agent's few turns a second
// write in well under a millisecond and keep the 10 ms (and so, without a
// journal, the SIGKILL window).
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
func (r *recorder) run() {
	defer close(r.done)
	batch := make([]*turnRecord, 0, maxRecordBatch)
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
func (r *recorder) gather(batch []*turnRecord, until time.Time, wake *time.Timer) []*turnRecord {
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
func (r *recorder) askFlush() {
	select {
	case r.flush <- struct{}{}:
	default: // asked already
	}
}

// write stores a batch in one UpdateMany with one mutation per
// conversation: its turns of the batch applied in order, so a
// conversation answered several times since the last write is decoded,
// encoded and written once.
func (r *recorder) write(batch []*turnRecord) {
	r.writeBatch(batch, true)
}

// writeBatch is write, telling written of each record when notify. With a
// journal, its transaction marks the batch's turns written.
func (r *recorder) writeBatch(batch []*turnRecord, notify bool) {
	opened := make([]bool, len(batch))
	// after[i] is the record as turn i left it, for written: the last
	// turn of its Turns is turn i's.
	after := make([]state.Record, len(batch))
	groups := groupByKey(batch)
	muts := make([]state.Mutation, len(groups))
	for g, idx := range groups {
		muts[g] = state.Mutation{Key: batch[idx[0]].turn.key, At: batch[idx[len(idx)-1]].at, Fn: func(rec *state.Record) error {
			applyTurns(rec, batch, idx, opened, after)
			return nil
		}}
	}
	var recs []state.Record
	var errs []error
	var err error
	if r.journal != nil {
		through := r.seqs.done(0) // the mark so far: a batch may have no turn journaled
		for _, tr := range batch {
			through = r.seqs.done(tr.jseq)
		}
		recs, errs, err = r.journal.UpdateManyThrough(muts, through)
	} else {
		recs, errs, err = r.store.UpdateMany(muts)
	}
	// A reader between the commit and here may apply a turn's usage twice
	// to its copy; it comes out the same.
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

// applyTurns applies batch's turns idx, of one conversation, to its
// record rec in order: opened[i] says whether turn i opened its breaker,
// after[i] is the record as turn i left it.
// Their lines are cloned once, not at every turn (lineEditor), so after's
// records hold none.
func applyTurns(rec *state.Record, batch []*turnRecord, idx []int, opened []bool, after []state.Record) {
	e := lineEditor{rec: rec}
	for _, i := range idx {
		opened[i] = e.applyTurn(batch[i], batch[i].at)
		after[i] = *rec
		after[i].Lines = nil // edited in place by the next turn
	}
}

// groupByKey returns the indexes of batch's turns grouped by conversation,
// the groups in the order of their first turn, each in queue order.
func groupByKey(batch []*turnRecord) [][]int {
	var groups [][]int
	at := make(map[state.Key]int, len(batch))
	for i, tr := range batch {
		g, ok := at[tr.turn.key]
		if !ok {
			g = len(groups)
			at[tr.turn.key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// applyTurn folds one answered turn into its conversation's record: the
// counters and turn list, the summary it used (so LRU eviction keeps it),
// and its line's numbers. It reports whether the turn opened the line's
// breaker.
func applyTurn(rec *state.Record, tr turnRecord, now time.Time) (opened bool) {
	e := lineEditor{rec: rec}
	return e.applyTurn(&tr, now)
}

// applyTurn is applyTurn on e's record, one of a run of edits.
func (e *lineEditor) applyTurn(tr *turnRecord, now time.Time) (opened bool) {
	rec, t := e.rec, &tr.turn
	if t.model != "" {
		rec.Model = t.model
	}
	if t.applied != nil {
		rec.TouchBranch(*t.applied, now)
	}
	ref := t.line
	relinkNew(rec, &ref)
	e.update(ref, now, lineEdit{answered: tr, opened: &opened})
	rec.AddTurn(state.Turn{At: now, TokensBefore: t.tokensBefore, TokensAfter: t.tokensAfter,
		InputTokens: tr.usage.InputTokens, CachedTokens: tr.usage.CachedTokens, CacheWriteTokens: tr.usage.CacheWriteTokens,
		Compacted: t.compacted})
	return opened
}

// applyAnswered is what a turn answered does to its line l (applyTurn):
// its dedups, what the upstream reported, its usage. It reports whether
// the breaker opened.
func applyAnswered(rec *state.Record, l *state.Line, tr *turnRecord) (opened bool) {
	keepDedups(l, &tr.turn)
	opened = observe(rec, l, *tr)
	countUsage(rec, l, &tr.turn, tr.usage)
	return opened
}

// keepDedups makes the dedups and prunes of t's forwarded request its
// line's, when t is the line's newest request.
func keepDedups(l *state.Line, t *turn) {
	if t.forwarded && l.Tip == t.line.tip && l.Messages == t.line.messages {
		l.Dedups, l.Prunes = t.dedups, t.prunes
	}
}

// observe folds what the upstream reported for a turn into the turn's
// line l of rec (rewrite.Observe: calibration per model, breaker). Only a
// request of the line comes here, so a side request under the same key (a
// title, a sub-agent) never moves the main line's numbers. It reports
// whether the breaker opened.
func observe(rec *state.Record, l *state.Line, tr turnRecord) (opened bool) {
	t := tr.turn
	n, opened := rewrite.Observe(numbersOf(*l), rewrite.Observation{
		Model: t.model, ModelRatio: rec.CalibrationFor(t.model), Raw: t.rawAfter,
		// The upstream's count of a request whose history it keeps is not
		// of what ctxpress counted: it calibrates nothing.
		UsageFound: tr.usage.Found && !t.serverHistory, InputTokens: tr.usage.InputTokens, Compacted: t.compacted, Trigger: t.trigger,
		CachedTokens: tr.usage.CachedTokens, CacheWriteTokens: tr.usage.CacheWriteTokens,
	})
	setNumbers(l, n)
	return opened
}

// observeCaches counts on l the turns tallied in t: what the cost model
// reads of them (rewrite.Observe does the same for the turn it observes).
func observeCaches(l *state.Line, t rewrite.UsageTally) {
	n := numbersOf(*l)
	n.Turns += t.Turns
	n.Cache = n.Cache.ObserveTally(t)
	setNumbers(l, n)
}

// cacheUsage is what the cost model reads of u.
func cacheUsage(u wire.Usage) rewrite.Usage {
	return rewrite.Usage{Input: u.InputTokens, Cached: u.CachedTokens, CacheWrite: u.CacheWriteTokens}
}

func (r *recorder) failed(msg string, err error) {
	if r.onStoreFailure != nil && err != nil {
		r.onStoreFailure("write")
	}
	r.warn.warn(r.now(), r.log, msg, err)
}

// close stops taking turns and waits until the queued ones are written.
func (r *recorder) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
		r.askFlush()
	}
	r.mu.Unlock()
	<-r.done
}
