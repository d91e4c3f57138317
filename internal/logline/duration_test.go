package logline

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// zerologMillis is what zerolog's Dur writes for d by default.
func zerologMillis(d time.Duration) string {
	var b bytes.Buffer
	l := zerolog.New(&b)
	l.Log().Dur("d", d).Send()
	s := b.String()
	return s[len(`{"d":`) : len(s)-len("}\n")]
}

func TestAppendMillisWritesWhatZerologDurWrites(t *testing.T) {
	rows := []time.Duration{0, 1, 9, 10, 999, 1000, 1001, 123456, 999999, time.Millisecond, time.Millisecond + 1,
		1746426, 1500 * time.Microsecond, time.Second, 59*time.Minute + 7*time.Nanosecond, 1e15 - 1, 1e15, 1e15 + 1,
		1<<53 + 1, 1<<63 - 1, -1, -1746426, -1 << 63}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		// Every magnitude, from nanoseconds to beyond the integer path.
		rows = append(rows, time.Duration(r.Int64N(int64(1)<<r.IntN(63)+1)))
	}
	for _, d := range rows {
		if got, want := string(AppendMillis(nil, d)), zerologMillis(d); got != want {
			t.Fatalf("AppendMillis(%d) = %s, zerolog writes %s", int64(d), got, want)
		}
	}
}

func TestDurIsZerologDurInTheJSONEvent(t *testing.T) {
	var a, b bytes.Buffer
	la, lb := zerolog.New(&a), zerolog.New(&b)
	for _, d := range []time.Duration{0, 412 * time.Microsecond, 1746426, 3 * time.Second} {
		la.Log().Dur("dur", d).Send()
		Dur(lb.Log(), "dur", d).Send()
	}
	if a.String() != b.String() {
		t.Fatalf("zerolog:\n%s\nDur:\n%s", a.String(), b.String())
	}
}

func TestDurFollowsZerologsDurationSettings(t *testing.T) {
	defer func(unit time.Duration, integer bool) {
		zerolog.DurationFieldUnit, zerolog.DurationFieldInteger = unit, integer
	}(zerolog.DurationFieldUnit, zerolog.DurationFieldInteger)
	zerolog.DurationFieldUnit, zerolog.DurationFieldInteger = time.Second, true
	var b bytes.Buffer
	l := zerolog.New(&b)
	Dur(l.Log(), "dur", 3*time.Second+5).Send()
	if want := `{"dur":3}` + "\n"; b.String() != want {
		t.Fatalf("Dur with seconds as integers wrote %q, want %q", b.String(), want)
	}
}

func BenchmarkAppendMillis(b *testing.B) {
	var dst []byte
	b.Run("integer", func(b *testing.B) {
		for b.Loop() {
			dst = AppendMillis(dst[:0], 1746426)
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			dst = strconv.AppendFloat(dst[:0], float64(1746426)/1e6, 'f', -1, 64)
		}
	})
}
