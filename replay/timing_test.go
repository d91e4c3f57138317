package replay

import (
	"testing"
	"time"
)

func TestTimingAnswerTime(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timing Timing
		output int
		want   time.Duration
	}{
		{"the default latency", Timing{OutputRate: 50}, 1000, DefaultLatency + 20*time.Second},
		{"no latency: the tokens at the rate", Timing{OutputRate: 2000, Latency: -1}, 1000, 500 * time.Millisecond},
		{"latency and rate", Timing{OutputRate: 1000, Latency: 100 * time.Millisecond}, 500, 600 * time.Millisecond},
		{"nothing written: the latency", Timing{Latency: 250 * time.Millisecond}, 0, 250 * time.Millisecond},
	} {
		if got := tc.timing.answerTime(tc.output); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (Timing{}).toolTime(); got != DefaultToolTime {
		t.Errorf("default tool time %v, want %v", got, DefaultToolTime)
	}
	if got := (Timing{ToolTime: -1}).toolTime(); got != 0 {
		t.Errorf("negative tool time %v, want none", got)
	}
}

// A turn's model time is read off the answer the next request carries; the
// last request's answer was not recorded.
func TestAnswerTokensAreTheModelOutputTheNextRequestAdds(t *testing.T) {
	tok := NewTokens()
	answer := `{"role":"assistant","content":"I will list the files."}`
	s := Session{Format: Chat, Requests: [][]byte{
		[]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		[]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},` + answer + `,{"role":"user","content":"go on"}]}`),
	}}
	got := answerTokens(s, tok)
	if want := tok.Count(answer); len(got) != 2 || got[0] != want || got[1] != 0 {
		t.Errorf("answer tokens %v, want [%d 0]", got, want)
	}
}

// fakeProxy is a ctxpress whose background summaries the test counts.
type fakeProxy struct{ background, waiting int }

func (p *fakeProxy) BaseURL() string { return "" }
func (p *fakeProxy) WaitIdle()       {}
func (p *fakeProxy) WaitRecorded()   {}
func (p *fakeProxy) Background() int { return p.background }
func (p *fakeProxy) Waiting() int    { return p.waiting }
func (p *fakeProxy) Close() error    { return nil }

// A background summary call is held until the session's time reaches its
// end; one in a request's path adds its time to that request's.
func TestClockHoldsABackgroundSummaryUntilItsTime(t *testing.T) {
	c := &clock{timing: Timing{OutputRate: 1000, Latency: -1, ToolTime: 100 * time.Millisecond}}
	c.sent(200 * time.Millisecond)
	c.summaryCall(300) // in the request's path: not held
	c.agentCall()
	if c.now != 500*time.Millisecond {
		t.Fatalf("after a turn of 200 ms with a 300 ms summary in its path: %v, want 500ms", c.now)
	}
	ended, held := make(chan struct{}), make(chan struct{})
	c.onHeld = held
	go func() { c.summaryCall(1000); close(ended) }() // in the background: 1 s
	<-held
	p := &fakeProxy{background: 1}
	for turn := 0; turn < 3; turn++ { // 3 × (100 + 200) ms: 1.4 s < 1.5 s
		c.wait(c.timing.toolTime())
		c.releaseDue(p)
		select {
		case <-ended:
			t.Fatalf("released at %v, before its end at 1.5s", c.now)
		default:
		}
		c.sent(200 * time.Millisecond)
		c.agentCall()
	}
	c.wait(c.timing.toolTime()) // 1.5 s
	p.background = 0            // once released, the summary is stored
	c.releaseDue(p)
	<-ended
}
