package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// The upstream sends event 2 only after the client has received event 1: a
// proxy that holds an event back deadlocks and the test fails on its guard.
func TestStreamRelaysEventByEvent(t *testing.T) {
	up := openaitest.New(t)
	gotFirst := make(chan struct{})
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			if i == 1 {
				select {
				case <-gotFirst:
				case <-r.Context().Done():
					return
				}
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})

	within(t, 10*time.Second, "event-by-event relay", func() {
		resp := postChat(t, context.Background(), p.URL, `{"model":"m","stream":true,"messages":[]}`)
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("content-type = %q", ct)
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "data: {\"n\":1}\n" {
			t.Errorf("first line %q, %v", line, err)
			return
		}
		close(gotFirst)
		rest, _ := io.ReadAll(br)
		if want := "\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\ndata: [DONE]\n\n"; string(rest) != want {
			t.Errorf("rest = %q, want %q", rest, want)
		}
	})
}

// The stream's usage chunk is read on a side copy and logged; the bytes the
// client gets are the upstream's.
func TestStreamUsageIsRecorded(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi there"}]}`
	resp := postChat(t, context.Background(), p.URL, body)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`"prompt_tokens":%d`, openaitest.PromptTokens([]byte(body)))
	if !strings.Contains(string(got), want) {
		t.Fatalf("client did not get the usage chunk: %s", got)
	}
	logWant := fmt.Sprintf(`"input_tokens":%d`, openaitest.PromptTokens([]byte(body)))
	waitFor(t, func() bool { return strings.Contains(p.logs.String(), logWant) }, "usage in the access log")
}

// A client that goes away mid-stream cancels the upstream request, even while
// the upstream is quiet, and leaves no goroutine behind.
func TestClientCancelMidStreamCancelsUpstream(t *testing.T) {
	up := openaitest.New(t)
	upstreamSawCancel := make(chan struct{})
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // quiet until the proxy hangs up
		close(upstreamSawCancel)
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})

	ctx, cancel := context.WithCancel(context.Background())
	resp := postChat(t, ctx, p.URL, `{"model":"m","stream":true,"messages":[]}`)
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "data: {\"n\":1}\n" {
		t.Fatalf("first line %q", line)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-upstreamSawCancel:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream never saw the cancel")
	}
	noStrayGoroutines(t)
}

// An upstream that sends headers and then nothing is cut after the idle
// timeout; the client's connection is ended, not left hanging.
func TestStalledStreamIsCut(t *testing.T) {
	up := openaitest.New(t)
	release := make(chan struct{})
	defer close(release)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p := startProxy(t, Config{Upstream: up.BaseURL(), StreamIdleTimeout: 300 * time.Millisecond})
	within(t, 10*time.Second, "stalled stream cut", func() {
		resp := postChat(t, context.Background(), p.URL, `{"model":"m","stream":true,"messages":[]}`)
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("stream ended cleanly after a stall; the client cannot tell it was cut (got %q)", got)
		}
		if !strings.HasPrefix(string(got), "data: {\"n\":1}") {
			t.Errorf("first event lost: %q", got)
		}
	})
	waitFor(t, func() bool { return strings.Contains(p.logs.String(), "idle timeout") }, "idle timeout in the log")
}

// Each row is a rule of how an answer is relayed (as TestSelectFlushInterval
// in net/http/httputil): a missing length makes a pass-through answer a
// possible stream, never a chat answer.
func TestRelayModeOf(t *testing.T) {
	const unknown, untilClose = -1, -2
	for _, tc := range []struct {
		rule          string
		ct            string
		length        int
		chat, askedSt bool
		want          relayMode
	}{
		{"an event stream is a stream", "text/event-stream", unknown, true, true, relayStream},
		{"an event stream is a stream, with parameters and any case", "Text/Event-Stream; charset=utf-8", 100, true, false, relayStream},
		{"an event stream on any path", "text/event-stream", unknown, false, false, relayStream},
		{"a chunked chat JSON answer is one document (Ollama past 2 KiB)", "application/json", unknown, true, false, relayWhole},
		{"a chat JSON answer until close is one document", "application/json; charset=utf-8", untilClose, true, false, relayWhole},
		{"a chat JSON answer of known length is one document", "application/json", 120, true, false, relayWhole},
		{"JSON to a stream request is one document (an error, or stream ignored)", "application/json", unknown, true, true, relayWhole},
		{"a problem+json error is one document", "application/problem+json", unknown, true, true, relayWhole},
		{"no Content-Type to a stream request is a stream", "", unknown, true, true, relayStream},
		{"another type to a stream request is a stream", "application/x-ndjson", unknown, true, true, relayStream},
		{"no Content-Type to a request that did not stream is one document", "", unknown, true, false, relayWhole},
		{"a plain-text chat error is read whole", "text/plain", 30, true, false, relayWhole},
		{"a pass-through answer of unknown length may be a stream", "application/json", unknown, false, false, relayStream},
		{"a pass-through answer until close may be a stream", "", untilClose, false, false, relayStream},
		{"a pass-through answer of known length is copied as it arrives", "application/json", 120, false, false, relayPass},
		{"a lookalike type is not an event stream", "text/event-streamx", 10, false, false, relayPass},
	} {
		if got := relayModeOf([]byte(tc.ct), tc.length, tc.chat, tc.askedSt); got != tc.want {
			t.Errorf("%s: relayModeOf(%q, %d, chat %v, stream %v) = %v, want %v", tc.rule, tc.ct, tc.length, tc.chat, tc.askedSt, got, tc.want)
		}
	}
}
