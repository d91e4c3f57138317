package proxy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
)

// Calibration bounds: one odd turn (a server that counts a cached prefix
// differently, a truncated answer) must not swing the estimate wildly.
const (
	minCalibration = 0.5
	maxCalibration = 2.0
)

// recordQueue is how many turns may wait for the store; past it a turn's
// record is dropped (and said so) rather than delaying an answer.
const recordQueue = 1024

// warnEvery rate-limits store-failure warnings: a broken disk is reported
// once per interval, not once per request.
const warnEvery = time.Minute

type turnRecord struct {
	turn  turn
	usage Usage
}

// recorder writes conversation records from one goroutine, off the request
// path.
type recorder struct {
	store state.Store
	log   zerolog.Logger
	queue chan turnRecord
	done  chan struct{}

	mu     sync.RWMutex
	closed bool // guarded by mu; set once the queue is closed

	warn warnLimiter
}

// warnLimiter logs a recurring failure once per warnEvery, with how many
// happened since the last line.
type warnLimiter struct {
	last  atomic.Int64 // unix nanos of the last warning
	count atomic.Int64 // failures since the last warning
}

func (w *warnLimiter) warn(log zerolog.Logger, msg string, err error) {
	n := w.count.Add(1)
	now := time.Now().UnixNano()
	last := w.last.Load()
	if now-last < int64(warnEvery) || !w.last.CompareAndSwap(last, now) {
		return
	}
	w.count.Store(0)
	log.Warn().Err(err).Int64("failures", n).Msg(msg)
}

func newRecorder(store state.Store, log zerolog.Logger) *recorder {
	r := &recorder{store: store, log: log, queue: make(chan turnRecord, recordQueue), done: make(chan struct{})}
	go r.run()
	return r
}

func (r *recorder) record(tr turnRecord) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return
	}
	select {
	case r.queue <- tr:
	default:
		r.failed("record queue full; turn not recorded", nil)
	}
}

func (r *recorder) run() {
	defer close(r.done)
	for tr := range r.queue {
		if _, err := r.store.Update(tr.turn.key, func(rec *state.Record) error {
			applyTurn(rec, tr, time.Now())
			return nil
		}); err != nil {
			r.failed("cannot write the conversation record", err)
		}
	}
}

// applyTurn folds one answered turn into its conversation's record.
func applyTurn(rec *state.Record, tr turnRecord, now time.Time) {
	t := tr.turn
	if t.model != "" {
		rec.Model = t.model
	}
	if tr.usage.Found {
		rec.LastInputTokens = tr.usage.InputTokens
		rec.LastEstimate = t.tokensAfter
		if t.tokensAfter > 0 && tr.usage.InputTokens > 0 {
			c := float64(tr.usage.InputTokens) / float64(t.tokensAfter)
			rec.Calibration = min(max(c, minCalibration), maxCalibration)
		}
	}
	if t.compacted && tr.usage.Found && t.trigger > 0 {
		if tr.usage.InputTokens > t.trigger {
			rec.Breaker.ConsecutiveOverTrigger++
			if rec.Breaker.ConsecutiveOverTrigger >= breakerTrips {
				rec.Breaker.Tripped = true
				rec.Breaker.Reason = fmt.Sprintf("upstream reported %d input tokens, over the trigger of %d, after %d compactions in a row",
					tr.usage.InputTokens, t.trigger, rec.Breaker.ConsecutiveOverTrigger)
			}
		} else {
			rec.Breaker.ConsecutiveOverTrigger = 0
		}
	}
	rec.AddTurn(state.Turn{At: now, TokensBefore: t.tokensBefore, TokensAfter: t.tokensAfter,
		InputTokens: tr.usage.InputTokens, Compacted: t.compacted})
}

func (r *recorder) failed(msg string, err error) { r.warn.warn(r.log, msg, err) }

// close stops taking turns and waits until the queued ones are written.
func (r *recorder) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
	}
	r.mu.Unlock()
	<-r.done
}
