package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// Shutdown lets a stream in flight finish before it returns.
func TestShutdownDrainsInFlightStream(t *testing.T) {
	up := openaitest.New(t)
	finish := make(chan struct{})
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		<-finish
		fmt.Fprint(w, "data: {\"n\":2}\n\ndata: [DONE]\n\n")
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","stream":true,"messages":[]}`)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "data: {\"n\":1}\n" {
		t.Fatalf("first line %q", line)
	}

	var streamEnded atomic.Bool
	type result struct {
		err   error
		early bool // returned before the stream could end
	}
	shutdown := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := p.Shutdown(ctx)
		shutdown <- result{err, !streamEnded.Load()}
	}()
	// Shutdown has begun once the listener refuses new connections; the
	// stream is still held upstream, so Shutdown must still be waiting.
	waitFor(t, func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err == nil {
			c.Close()
		}
		return err != nil
	}, "the listener closed")
	streamEnded.Store(true)
	close(finish)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: {\"n\":2}\n\ndata: [DONE]\n\n" {
		t.Fatalf("stream cut by shutdown: %q, %v", rest, err)
	}
	if r := <-shutdown; r.early {
		t.Fatalf("Shutdown returned (%v) while a stream was in flight", r.err)
	} else if r.err != nil {
		t.Fatalf("Shutdown: %v", r.err)
	}
}
