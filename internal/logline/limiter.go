package logline

import (
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// WarnEvery rate-limits a recurring failure's warnings: a broken disk is
// reported once per interval, not once per request.
const WarnEvery = time.Minute

// Limiter logs a recurring failure once per WarnEvery, with how many
// happened since the last line. The zero value is ready.
type Limiter struct {
	last  atomic.Int64 // unix nanos of the last warning
	count atomic.Int64 // failures since the last warning
}

// Warn counts a failure at at and logs it, with the count, unless one was
// logged within WarnEvery.
func (w *Limiter) Warn(at time.Time, log zerolog.Logger, msg string, err error) {
	n := w.count.Add(1)
	now := at.UnixNano()
	last := w.last.Load()
	if now-last < int64(WarnEvery) || !w.last.CompareAndSwap(last, now) {
		return
	}
	w.count.Store(0)
	log.Warn().Err(err).Int64("failures", n).Msg(msg)
}
