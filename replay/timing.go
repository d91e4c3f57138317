package replay

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// The defaults of Timing. A hosted model writes some 50 to 100 tokens a
// second and answers a long, mostly cached prompt after about a second;
// an agent's tools (a file read, a grep, a short command) mostly take a
// fraction of a second.
const (
	DefaultToolTime   = 100 * time.Millisecond
	DefaultOutputRate = 60.0 // tokens a second
	DefaultLatency    = time.Second
)

// Timing says how long a live session's steps take. It decides when a
// summary ctxpress prepares in the background applies: live, the agent's
// turns go on while the summary call runs, so it applies from the first
// request sent after the call ends, not from the next one.
type Timing struct {
	// ToolTime passes between an answer and the agent's next request
	// (0: DefaultToolTime; negative: none).
	ToolTime time.Duration
	// OutputRate is how many tokens a second the provider writes, agent
	// answers and summaries alike (0: DefaultOutputRate).
	OutputRate float64
	// Latency passes before the provider's first token (0:
	// DefaultLatency; negative: none).
	Latency time.Duration
	// Live waits for real: the simulated provider takes each answer's time
	// and the agent the tool time, as in a live session (slow, and only as
	// exact as the machine's scheduling). Otherwise the replay keeps a
	// simulated clock: the provider holds a background summary call's
	// answer until the agent requests that fit in its time were sent,
	// which is deterministic and takes no time.
	Live bool
}

func (t Timing) toolTime() time.Duration {
	switch {
	case t.ToolTime < 0:
		return 0
	case t.ToolTime == 0:
		return DefaultToolTime
	}
	return t.ToolTime
}

// answerTime is how long the provider takes to write an answer of output
// tokens.
func (t Timing) answerTime(output int) time.Duration {
	rate, lat := t.OutputRate, t.Latency
	if rate <= 0 {
		rate = DefaultOutputRate
	}
	switch {
	case lat < 0:
		lat = 0
	case lat == 0:
		lat = DefaultLatency
	}
	return lat + time.Duration(float64(output)/rate*float64(time.Second))
}

// answerTokens is, for each request of s, about how many tokens the
// agent's model wrote in answer to it: the model output the next request
// adds to its history (the last request's answer is not recorded: 0).
func answerTokens(s Session, tok *Tokens) []int {
	key := "messages"
	if s.Format == Responses {
		key = "input"
	}
	out := make([]int, len(s.Requests))
	for k := 0; k+1 < len(s.Requests); k++ {
		had := len(gjson.GetBytes(s.Requests[k], key).Array())
		for i, e := range gjson.GetBytes(s.Requests[k+1], key).Array() {
			if i >= had && isModelOutput(s.Format, e) {
				out[k] += tok.Count(e.Raw)
			}
		}
	}
	return out
}

// clock is the time of one session replayed through ctxpress, shared by
// the driver (send) and the simulated providers of the leg (Sim.clock).
type clock struct {
	timing Timing

	mu sync.Mutex
	// now is the session's time: when the request in flight was sent,
	// then when its answer ended.
	now time.Duration // guarded by mu
	// inFlight: an agent request was sent whose agent call the provider
	// has not answered yet; a summary call meanwhile is that request's
	// own (a compaction in its path), not one in the background.
	inFlight bool          // guarded by mu
	model    time.Duration // the request in flight's model time; guarded by mu
	syncTime time.Duration // its summary calls' time so far; guarded by mu
	held     []heldCall    // background summary calls, by when they end; guarded by mu
	// onHeld, when set (tests), is told each time a call is held.
	onHeld chan<- struct{}
}

// heldCall is a background summary call whose answer waits for the
// session's time to reach due.
type heldCall struct {
	due     time.Duration
	release chan struct{}
}

// sent says an agent request whose answer takes model is on its way.
func (c *clock) sent(model time.Duration) {
	c.mu.Lock()
	c.inFlight, c.model, c.syncTime = true, model, 0
	c.mu.Unlock()
}

// agentCall is the provider answering an agent request: live it takes its
// model time; simulated, the session's time moves to the answer's end.
func (c *clock) agentCall() {
	c.mu.Lock()
	model := c.model
	if !c.timing.Live {
		c.now += c.syncTime + model
	}
	c.inFlight = false
	c.mu.Unlock()
	if c.timing.Live {
		time.Sleep(model)
	}
}

// summaryCall is the provider answering a summary call of output tokens:
// live it takes its time; simulated, a call in a request's path adds its
// time to that request's, and one in the background is held until the
// driver releases it (releaseDue, releaseNext).
func (c *clock) summaryCall(output int) {
	d := c.timing.answerTime(output)
	if c.timing.Live {
		time.Sleep(d)
		return
	}
	c.mu.Lock()
	if c.inFlight {
		c.syncTime += d
		c.mu.Unlock()
		return
	}
	h := heldCall{due: c.now + d, release: make(chan struct{})}
	i, _ := slices.BinarySearchFunc(c.held, h.due, func(a heldCall, due time.Duration) int {
		if a.due <= due {
			return -1 // calls due at the same time end in arrival order
		}
		return 1
	})
	c.held = slices.Insert(c.held, i, h)
	c.mu.Unlock()
	if c.onHeld != nil {
		c.onHeld <- struct{}{}
	}
	<-h.release
}

// heldCalls is how many background summary calls wait.
func (c *clock) heldCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// releaseNext ends the held call due first, the session's time moving to
// its end if that is later; false when none is held.
func (c *clock) releaseNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 {
		return false
	}
	h := c.held[0]
	c.held = c.held[1:]
	c.now = max(c.now, h.due)
	close(h.release)
	return true
}

// wait adds d to the session's time (the agent's tool time).
func (c *clock) wait(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

// settle waits until p has recorded the turns answered so far and every
// summary it prepares in the background has ended or waits at the
// provider, so the next request finds the state a live one would.
func (c *clock) settle(p Proxy) {
	p.WaitRecorded() // the turn's end, which starts a precompaction, is past
	for p.Background() != c.heldCalls() {
		time.Sleep(100 * time.Microsecond) // a condition, not a duration
	}
	p.WaitRecorded()
}

// drain lets the summary calls still running end after the session's last
// request, as live they would: billed, applied to nothing.
func (c *clock) drain(p Proxy) {
	for {
		c.settle(p)
		if !c.releaseNext() {
			return
		}
	}
}

// releaseDue ends, in order, the held calls that end by the session's
// time now, each followed by settle: their summaries apply to the next
// request.
func (c *clock) releaseDue(p Proxy) {
	for {
		c.mu.Lock()
		due := len(c.held) > 0 && c.held[0].due <= c.now
		c.mu.Unlock()
		if !due || !c.releaseNext() {
			return
		}
		c.settle(p)
	}
}

// roundTrip sends req and reads its answer; simulated, when the request
// waits in ctxpress for a compaction whose summary call is held (a turn
// over the trigger while the summary is prepared), the call is released,
// as live the turn would wait for it.
func (c *clock) roundTrip(client *http.Client, req *http.Request, p Proxy) (*http.Response, []byte, error) {
	type result struct {
		resp *http.Response
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		body, err := readAll(resp)
		done <- result{resp, body, err}
	}()
	for {
		select {
		case r := <-done:
			return r.resp, r.body, r.err
		case <-time.After(200 * time.Microsecond): // polls a condition
			// A call released before is let end first.
			if !c.timing.Live && p != nil && p.Waiting() > 0 && p.Background() == c.heldCalls() {
				c.releaseNext()
			}
		}
	}
}

// readAll reads an answer to its end (a stream's last event) and closes it.
func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
