package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
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

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- p.Shutdown(ctx)
	}()
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) while a stream was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(finish)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: {\"n\":2}\n\ndata: [DONE]\n\n" {
		t.Fatalf("stream cut by shutdown: %q, %v", rest, err)
	}
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
