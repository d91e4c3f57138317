package proxy

import (
	"bufio"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// Event is one compaction as subscribers and the webhook see it.
type Event struct {
	Time          time.Time `json:"time"`
	Type          string    `json:"type"` // "compaction"
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
}

// eventBus fans events out to SSE subscribers and an optional webhook. A
// slow subscriber misses events rather than slowing a request.
type eventBus struct {
	log  zerolog.Logger
	hook chan []byte // nil without a webhook

	mu   sync.Mutex
	subs map[chan []byte]struct{} // guarded by mu
}

func newEventBus(log zerolog.Logger, webhookURL string) *eventBus {
	b := &eventBus{log: log, subs: map[chan []byte]struct{}{}}
	if webhookURL != "" {
		b.hook = make(chan []byte, 256)
		go b.postHooks(webhookURL)
	}
	return b
}

func (b *eventBus) publish(e Event) {
	e.Type = "compaction"
	data, _ := json.Marshal(e)
	lvl := zerolog.InfoLevel
	if e.Result == "failed" {
		lvl = zerolog.WarnLevel
	}
	b.log.WithLevel(lvl).RawJSON("event", data).Msg("compaction")
	b.mu.Lock()
	for ch := range b.subs {
		select {
		case ch <- data:
		default:
		}
	}
	b.mu.Unlock()
	if b.hook != nil {
		select {
		case b.hook <- data:
		default:
			b.log.Warn().Msg("event webhook queue full; event not posted")
		}
	}
}

func (b *eventBus) subscribe() chan []byte {
	ch := make(chan []byte, 64)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch
}

func (b *eventBus) unsubscribe(ch chan []byte) {
	b.mu.Lock()
	delete(b.subs, ch)
	b.mu.Unlock()
}

// postHooks posts each event to the webhook, one at a time, giving up on an
// event after one try: events are a notification, not a ledger.
func (b *eventBus) postHooks(url string) {
	client := &fasthttp.Client{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
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
func (b *eventBus) serveEvents(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	done := ctx.Done()
	ch := b.subscribe()
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer b.unsubscribe(ch)
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
			case data := <-ch:
				w.WriteString("event: compaction\ndata: ")
				w.Write(data)
				if _, err := w.WriteString("\n\n"); err != nil || w.Flush() != nil {
					return
				}
			}
		}
	})
}
