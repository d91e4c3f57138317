package admin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Skipped compactions are summed up at info at most every
// skipSummaryEvery, reasons counted without their numbers.
func TestSkipTally(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const small = "compaction skipped: would reclaim 812 tokens, under the minimum 4096"
	const tail = "compaction skipped: nothing to summarise outside the last 6 messages"
	var tally skipTally
	for _, step := range []struct {
		rule   string
		at     time.Duration
		reason string
		want   string // "" when no line is due
	}{
		{"the first skip opens the window, no line", 0, small, ""},
		{"skips within the window are only counted", time.Minute, tail, ""},
		{"a number apart is the same reason", 4 * time.Minute, "compaction skipped: would reclaim 97 tokens, under the minimum 4096", ""},
		{"the first skip past the window sums it up, itself included", 5*time.Minute + 400*time.Millisecond, small,
			"4 compactions skipped in the last 5m0s: would reclaim N tokens, under the minimum N (3); nothing to summarise outside the last N messages (1)"},
		{"the next skip opens a new window", 6 * time.Minute, tail, ""},
		{"which is summed up on its own", 11 * time.Minute, tail, "2 compactions skipped in the last 5m0s: nothing to summarise outside the last N messages (2)"},
	} {
		got, due := tally.add(t0.Add(step.at), step.reason)
		if due != (step.want != "") || got != step.want {
			t.Errorf("%s: got %q (due %v), want %q", step.rule, got, due, step.want)
		}
	}
}

// A skipped compaction's event is logged at debug; failures and successes
// keep their levels.
func TestSkippedCompactionIsLoggedAtDebug(t *testing.T) {
	var out bytes.Buffer
	bus := NewBus(zerolog.New(&out).Level(zerolog.InfoLevel), "", "r")
	bus.Publish(Event{Time: time.Now(), Result: "skipped", Reason: "compaction skipped: would reclaim 1 tokens, under the minimum 2"})
	if out.Len() != 0 {
		t.Fatalf("a skip logged at info: %s", out.String())
	}
	bus.Publish(Event{Time: time.Now(), Result: "ok"})
	bus.Publish(Event{Time: time.Now(), Result: "failed", Reason: "timeout"})
	if lines := strings.Count(out.String(), "\n"); lines != 2 || !strings.Contains(out.String(), `"level":"warn"`) {
		t.Fatalf("ok and failed events: %s", out.String())
	}
}
