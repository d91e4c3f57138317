package admin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/internal/envproxy"
	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// Event types on /ctxpress/events; each is also the SSE event name.
const (
	// EventCompaction: a compaction ended (ok, skipped or failed). The
	// default type, and the only one posted to the webhook.
	EventCompaction = "compaction"
	// EventCompactionStarted: a summary call began (an Event without a
	// result), so a dashboard can show the compaction while it runs.
	EventCompactionStarted = "compaction_started"
	// EventTurn: a chat turn was written to its conversation's record (a
	// TurnEvent), so a dashboard can redraw without polling.
	EventTurn = "turn"
)

// Event is one compaction as subscribers and the webhook see it.
type Event struct {
	Time          time.Time `json:"time"`
	Type          string    `json:"type"` // EventCompaction or EventCompactionStarted
	Conversation  string    `json:"conversation"`
	Model         string    `json:"model,omitempty"`
	Trigger       string    `json:"trigger"` // auto | precompact | manual
	Result        string    `json:"result"`  // ok | skipped | failed
	Reason        string    `json:"reason,omitempty"`
	Covered       int       `json:"covered_messages"`
	TokensBefore  int       `json:"tokens_before"`
	TokensAfter   int       `json:"tokens_after"`
	SummaryTokens int       `json:"summary_tokens"`
	DurationMS    int64     `json:"duration_ms"`
	// SummarizerMS is the time of the summary call alone; 0 when no call
	// was made (a skip).
	SummarizerMS int64 `json:"summarizer_ms,omitempty"`
	// SummaryUsage is what the upstream reported for the summary calls;
	// nil when none was answered.
	SummaryUsage *UsageInfo `json:"summary_usage,omitempty"`
	// Replica is the ctxpress that made the event (Config.Replica).
	Replica string `json:"replica"`
}

// TurnEvent is a chat turn as recorded in its conversation.
type TurnEvent struct {
	Time         time.Time `json:"time"`
	Type         string    `json:"type"` // EventTurn
	Conversation string    `json:"conversation"`
	Namespace    string    `json:"namespace"`
	Model        string    `json:"model,omitempty"`
	TokensBefore int       `json:"tokens_before"`
	TokensAfter  int       `json:"tokens_after"`
	InputTokens  int       `json:"input_tokens"`
	// CachedTokens and CacheWriteTokens: TurnInfo's.
	CachedTokens     int  `json:"cached_tokens,omitempty"`
	CacheWriteTokens int  `json:"cache_write_tokens,omitempty"`
	Compacted        bool `json:"compacted"`
	// ServerCompactionInputTokens and ServerCompactionOutputTokens:
	// TurnInfo's.
	ServerCompactionInputTokens  int    `json:"server_compaction_input_tokens,omitempty"`
	ServerCompactionOutputTokens int    `json:"server_compaction_output_tokens,omitempty"`
	Requests                     int64  `json:"requests"` // the conversation's, this turn included
	Replica                      string `json:"replica"`
}

// frame is one event on its way to subscribers.
type frame struct {
	typ  string
	data []byte
}

// subscriber is one /ctxpress/events client and the event types it asked for.
type subscriber struct {
	ch    chan frame
	types map[string]bool
}

// Bus fans events out to SSE subscribers and an optional webhook. A
// slow subscriber misses events rather than slowing a request.
type Bus struct {
	log  zerolog.Logger
	hook chan []byte // nil without a webhook
	// OnCompaction, when set, sees every compaction event (metrics); set
	// before the server serves, never changed after.
	OnCompaction func(Event)

	// replica is put in every event this process makes.
	replica string
	// shared, when set (join), carries events to and from other replicas.
	shared     state.Broadcaster
	origin     string
	stopShared func()

	mu   sync.Mutex
	subs map[*subscriber]struct{} // guarded by mu

	skipMu sync.Mutex
	skips  skipTally // guarded by skipMu
	// turnWatchers counts the subscribers to turn events: dashboards
	// open now (watched).
	turnWatchers atomic.Int32
}

// skipSummaryEvery is the shortest time between two info lines summing
// up skipped compactions.
const skipSummaryEvery = 5 * time.Minute

// skipTally counts the skipped compactions since its window began, by
// reason.
type skipTally struct {
	since   time.Time // zero: no skip yet in this window
	n       int
	reasons map[string]int
}

// add counts a skip at now and returns the info line summing up the
// window when it is due: at the first skip skipSummaryEvery or more after
// the window's first, which the line counts too; the next skip opens a
// new window. Reasons are counted without their numbers, so "would
// reclaim 812 tokens" and "would reclaim 97 tokens" are one reason.
func (t *skipTally) add(now time.Time, reason string) (string, bool) {
	if t.n == 0 {
		t.since, t.reasons = now, map[string]int{}
	}
	t.n++
	t.reasons[skipReason(reason)]++
	span := now.Sub(t.since)
	if span < skipSummaryEvery {
		return "", false
	}
	kinds := make([]string, 0, len(t.reasons))
	for r := range t.reasons {
		kinds = append(kinds, r)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if a, b := t.reasons[kinds[i]], t.reasons[kinds[j]]; a != b {
			return a > b
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, r := range kinds {
		parts[i] = fmt.Sprintf("%s (%d)", r, t.reasons[r])
	}
	line := fmt.Sprintf("%d compactions skipped in the last %s: %s", t.n, span.Round(time.Second), strings.Join(parts, "; "))
	*t = skipTally{}
	return line, true
}

// skipReason is a skip's reason without rewrite's "compaction skipped: "
// and with every number as N.
func skipReason(reason string) string {
	reason = strings.TrimPrefix(reason, "compaction skipped: ")
	var b strings.Builder
	digits := false
	for _, r := range reason {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "no reason given"
	}
	return b.String()
}

// watched reports whether a subscriber follows turns now (a dashboard is
// open); false for a nil Bus.
func (b *Bus) watched() bool { return b != nil && b.turnWatchers.Load() > 0 }

// NewBus is a bus that logs to log, posts compaction events to
// webhookURL when set, and names replica in every event.
func NewBus(log zerolog.Logger, webhookURL, replica string) *Bus {
	b := &Bus{log: log, subs: map[*subscriber]struct{}{}, replica: replica}
	if webhookURL != "" {
		b.hook = make(chan []byte, 256)
		go b.postHooks(webhookURL)
	}
	return b
}

// Publish tells subscribers, the webhook and the log that a compaction
// ended.
func (b *Bus) Publish(e Event) {
	e.Type, e.Replica = EventCompaction, b.replica
	data, _ := json.Marshal(e)
	lvl := zerolog.InfoLevel
	switch e.Result {
	case "failed":
		lvl = zerolog.WarnLevel
	case "skipped":
		// A skip is a decision, often repeated turn after turn: debug, and
		// a sum at info every skipSummaryEvery at most.
		lvl = zerolog.DebugLevel
		b.skipMu.Lock()
		summary, due := b.skips.add(e.Time, e.Reason)
		b.skipMu.Unlock()
		if due {
			b.log.Info().Msg(summary)
		}
	}
	b.log.WithLevel(lvl).RawJSON("event", data).Msg("compaction")
	if b.OnCompaction != nil {
		b.OnCompaction(e)
	}
	b.send(frame{EventCompaction, data})
	b.share(EventCompaction, data)
	if b.hook != nil {
		select {
		case b.hook <- data:
		default:
			b.log.Warn().Msg("event webhook queue full; event not posted")
		}
	}
}

// Started tells subscribers that a summary call of e's conversation began.
// It is not logged at info nor posted: the compaction event that follows is.
func (b *Bus) Started(e Event) {
	e.Type, e.Replica = EventCompactionStarted, b.replica
	data, _ := json.Marshal(e)
	b.log.Debug().RawJSON("event", data).Msg("compaction started")
	b.send(frame{EventCompactionStarted, data})
	b.share(EventCompactionStarted, data)
}

// Turn tells subscribers that a turn was recorded.
func (b *Bus) Turn(e TurnEvent) {
	if b.shared == nil && !b.wanted(EventTurn) {
		return // encoded for nobody, on every turn
	}
	e.Type, e.Replica = EventTurn, b.replica
	data, _ := json.Marshal(e)
	b.send(frame{EventTurn, data})
	b.share(EventTurn, data)
}

// send gives f to every subscriber that asked for its type, without
// waiting: a full subscriber misses it.
func (b *Bus) send(f frame) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for sub := range b.subs {
		if !sub.types[f.typ] {
			continue
		}
		select {
		case sub.ch <- f:
		default:
		}
	}
}

// wanted reports whether a subscriber asks for events of typ now.
func (b *Bus) wanted(typ string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for sub := range b.subs {
		if sub.types[typ] {
			return true
		}
	}
	return false
}

func (b *Bus) subscribe(types map[string]bool) *subscriber {
	sub := &subscriber{ch: make(chan frame, 64), types: types}
	b.mu.Lock()
	b.subs[sub] = struct{}{}
	b.mu.Unlock()
	if types[EventTurn] {
		b.turnWatchers.Add(1)
	}
	return sub
}

func (b *Bus) unsubscribe(sub *subscriber) {
	b.mu.Lock()
	delete(b.subs, sub)
	b.mu.Unlock()
	if sub.types[EventTurn] {
		b.turnWatchers.Add(-1)
	}
}

// eventTypes parses the types query parameter of /ctxpress/events: a comma
// list of event types, or "all". Absent, it is compaction only, what the
// stream carried before there were other types, so an existing client that
// reads data lines without looking at event names sees no new shapes.
func eventTypes(q string) (map[string]bool, bool) {
	if q == "" {
		return map[string]bool{EventCompaction: true}, true
	}
	all := map[string]bool{EventCompaction: true, EventCompactionStarted: true, EventTurn: true}
	if q == "all" {
		return all, true
	}
	types := map[string]bool{}
	for _, t := range strings.Split(q, ",") {
		if !all[t] {
			return nil, false
		}
		types[t] = true
	}
	return types, true
}

// postHooks posts each event to the webhook, one at a time, giving up on an
// event after one try: events are a notification, not a ledger.
func (b *Bus) postHooks(url string) {
	dial, _ := envproxy.Dial("", 10*time.Second) // as the upstream's; nil dials directly
	client := &fasthttp.Client{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, Dial: dial,
		DialDualStack: true} // fasthttp dials IPv4 only by default
	for data := range b.hook {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI(url)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(data)
		if err := client.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() >= 300 {
			b.log.Warn().Err(err).Int("status", resp.StatusCode()).Msg("event webhook failed")
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
}

// serveEvents streams events as SSE until the client leaves or the server
// shuts down; a comment every 15 s keeps idle connections open.
func (b *Bus) serveEvents(ctx *fasthttp.RequestCtx) {
	types, ok := eventTypes(string(ctx.QueryArgs().Peek("types")))
	if !ok {
		writeError(ctx, fasthttp.StatusBadRequest, "bad_request",
			"types: want a comma list of compaction, compaction_started, turn, or all")
		return
	}
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	done := ctx.Done()
	sub := b.subscribe(types)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer b.unsubscribe(sub)
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		if _, err := w.WriteString(": ctxpress events\n\n"); err != nil || w.Flush() != nil {
			return
		}
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := w.WriteString(": keep-alive\n\n"); err != nil || w.Flush() != nil {
					return
				}
			case f := <-sub.ch:
				w.WriteString("event: " + f.typ + "\ndata: ")
				w.Write(f.data)
				if _, err := w.WriteString("\n\n"); err != nil || w.Flush() != nil {
					return
				}
			}
		}
	})
}
