package logline

import (
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// Dur adds d to ev as zerolog's Dur does, in milliseconds, formatted
// without a float conversion when zerolog's duration settings are its
// defaults (a float of milliseconds, shortest form): the two durations of
// every access line were a third of its cost.
func Dur(ev *zerolog.Event, key string, d time.Duration) *zerolog.Event {
	if zerolog.DurationFieldUnit != time.Millisecond || zerolog.DurationFieldInteger || zerolog.FloatingPointPrecision != -1 {
		return ev.Dur(key, d)
	}
	var buf [32]byte
	return ev.RawJSON(key, AppendMillis(buf[:0], d))
}

// AppendMillis appends d in milliseconds as strconv.FormatFloat(ms, 'f',
// -1, 64) writes float64(d)/1e6: the same digits, from integer arithmetic.
// Below 10¹⁵ ns (11 days) the exact decimal d/10⁶ has at most 15
// significant digits, so no shorter decimal rounds to the same float64 and
// it is the shortest form; longer ones (and negative ones) go through
// strconv.
func AppendMillis(dst []byte, d time.Duration) []byte {
	const limit = 1e15
	if d < 0 || d >= limit {
		return strconv.AppendFloat(dst, float64(d)/float64(time.Millisecond), 'f', -1, 64)
	}
	ns := int64(d)
	dst = strconv.AppendInt(dst, ns/1e6, 10)
	frac := ns % 1e6
	if frac == 0 {
		return dst
	}
	// The six digits after the point, their trailing zeros dropped.
	var six [6]byte
	for i := 5; i >= 0; i-- {
		six[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 6
	for six[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, six[:n]...)
}
