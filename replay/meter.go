package replay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/ctxpress/ctxpress/wire/sse"
	"github.com/tidwall/gjson"
)

// call is one conversation request the provider answered, as the meter
// read it.
type call struct {
	summary bool // one of ctxpress's summary calls
	status  int
	usage   wire.Usage
	// err says why the call cannot be counted: the provider's refusal, an
	// answer without usage, a transport error.
	err string
	// overflow: the refusal is a prompt over the upstream's window (a real
	// upstream's; the simulation has none).
	overflow bool
}

// reply is a provider's whole answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// backend answers one request whose body was read: the simulation, or a
// real upstream.
type backend func(r *http.Request, body []byte) (reply, error)

// simBackend asks sim.
func simBackend(sim *Sim) backend {
	return func(r *http.Request, body []byte) (reply, error) {
		f, ok := formatOf(r.URL.Path)
		if !ok {
			return reply{status: http.StatusNotFound, header: http.Header{}, body: errorBody(Chat, "not_found_error", "Unknown request URL")}, nil
		}
		status, ctype, out := sim.answer(f, body)
		return reply{status: status, header: http.Header{"Content-Type": {ctype}}, body: out}, nil
	}
}

// upstreamBackend forwards to base (a base URL such as
// http://127.0.0.1:8080/v1), the path below the meter's /v1 appended.
func upstreamBackend(client *http.Client, base string) backend {
	base = strings.TrimRight(base, "/")
	return func(r *http.Request, body []byte) (reply, error) {
		url := base + strings.TrimPrefix(r.URL.Path, "/v1")
		if r.URL.RawQuery != "" {
			url += "?" + r.URL.RawQuery
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, url, bytes.NewReader(body))
		if err != nil {
			return reply{}, err
		}
		for k, vs := range r.Header {
			if !hopHeader(k) {
				req.Header[k] = vs
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			return reply{}, fmt.Errorf("reading the upstream's answer: %w", err)
		}
		return reply{status: resp.StatusCode, header: resp.Header, body: out}, nil
	}
}

// hopHeader reports whether a header belongs to one connection (RFC 9110
// 7.6.1) or to the body's framing, which the meter redoes.
func hopHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Accept-Encoding", "Content-Encoding":
		return true
	}
	return false
}

// meter is the provider as both legs reach it: an HTTP server on loopback
// that passes each request to its backend and records the usage of every
// conversation call from the answer.
type meter struct {
	backend backend
	// allSummaries: every call here is a summary call (the summariser's own
	// endpoint).
	allSummaries bool
	srv          *http.Server
	ln           net.Listener

	mu    sync.Mutex
	calls []call // guarded by mu
}

func startMeter(b backend, allSummaries bool) (*meter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &meter{backend: b, allSummaries: allSummaries, ln: ln}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: time.Minute}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// baseURL is the meter's base URL, as a client's upstream setting.
func (m *meter) baseURL() string { return "http://" + m.ln.Addr().String() + "/v1" }

func (m *meter) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

func (m *meter) recorded() []call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]call(nil), m.calls...)
}

func (m *meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, conversation := formatOf(r.URL.Path)
	if conversation && f == Chat {
		// Usage is what the meter is for: a chat stream asks for it (as
		// ctxpress itself does) however the client sent it.
		body, _ = chat.EnsureStreamUsage(body)
	}
	rep, err := m.backend(r, body)
	if err != nil {
		rep = reply{status: http.StatusBadGateway, header: http.Header{"Content-Type": {"application/json"}},
			body: errorBody(f, "api_error", "replay: "+err.Error())}
	}
	if conversation {
		c := call{summary: m.allSummaries || IsSummaryCall(f, body), status: rep.status}
		switch {
		case err != nil:
			c.err = err.Error()
		case rep.status < 200 || rep.status > 299:
			c.err = fmt.Sprintf("status %d: %s", rep.status, errorMessage(rep.body))
			c.overflow = wire.IsContextOverflow(rep.status, rep.body)
		default:
			if c.usage = usageOf(f, rep); !c.usage.Found {
				c.err = "the answer carried no usage"
			}
		}
		m.mu.Lock()
		m.calls = append(m.calls, c)
		m.mu.Unlock()
	}
	for k, vs := range rep.header {
		if !hopHeader(k) {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// usageOf reads the usage of a whole answer or of a stream, in format f.
func usageOf(f Format, rep reply) wire.Usage {
	if !strings.HasPrefix(rep.header.Get("Content-Type"), "text/event-stream") {
		switch f {
		case Responses:
			return responses.UsageFromJSON(rep.body)
		case Messages:
			return messages.UsageFromJSON(rep.body)
		}
		return chat.UsageFromJSON(rep.body)
	}
	switch f {
	case Responses:
		var w responses.StreamWatch
		w.Observe(rep.body)
		return w.Usage()
	case Messages:
		var w messages.StreamWatch
		w.Observe(rep.body)
		return w.Usage()
	}
	// Chat: the last event with usage (the usage chunk, after the
	// finish_reason one).
	var u wire.Usage
	for rest := rep.body; len(rest) > 0; {
		var line []byte
		line, rest = sse.NextLine(rest)
		if data, ok := sse.Data(line); ok && gjson.ValidBytes(data) {
			if got := chat.ReadUsage(gjson.GetBytes(data, "usage")); got.Found {
				u = got
			}
		}
	}
	return u
}

// errorMessage is an error answer's message, in OpenAI's or Anthropic's
// shape, else the start of the body.
func errorMessage(body []byte) string {
	if m := gjson.GetBytes(body, "error.message"); m.Exists() {
		return m.String()
	}
	const most = 300
	if len(body) > most {
		body = body[:most]
	}
	return string(body)
}
