package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestUpstreamDownIs502(t *testing.T) {
	p := startProxy(t, Config{Upstream: "http://" + freeAddr(t) + "/v1"})
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","messages":[]}`)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if e := decodeError(t, resp); e.Error.Code != upstreamerr.CodeUnreachable {
		t.Fatalf("code = %q", e.Error.Code)
	}
}

func TestBodyTooLargeIs413(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), MaxBodyBytes: 1024})
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("a", 2000)+`"}]}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if e := decodeError(t, resp); e.Error.Code != codeBodyTooLarge {
		t.Fatalf("code = %q", e.Error.Code)
	}
	if len(up.Requests()) != 0 {
		t.Fatal("an oversized body was forwarded")
	}
}

func TestSlowUpstreamIs504(t *testing.T) {
	up := openaitest.New(t)
	release := make(chan struct{})
	defer close(release)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p := startProxy(t, Config{Upstream: up.BaseURL(), UpstreamTimeout: 200 * time.Millisecond})
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","messages":[]}`)
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if e := decodeError(t, resp); e.Error.Code != upstreamerr.CodeTimeout {
		t.Fatalf("code = %q", e.Error.Code)
	}
}

// An upstream's own error answer reaches the client exactly as sent.
func TestUpstreamErrorStatusPassesThrough(t *testing.T) {
	up := openaitest.New(t)
	const body = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, body)
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","messages":[]}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || string(got) != body || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("got %d %q Retry-After=%q", resp.StatusCode, got, resp.Header.Get("Retry-After"))
	}
}

// An upstream that dies mid-body gives a 502, not a truncated 200.
func TestUpstreamResetMidBodyIs502(t *testing.T) {
	up := openaitest.New(t)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"id":"partial`)
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","messages":[]}`)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	decodeError(t, resp)
}

func TestUnknownAdminPathIs404(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	resp, err := http.Get(p.URL + "/ctxpress/nope")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 404 {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	decodeError(t, resp)
	resp, err = http.Get(p.URL + "/ctxpress/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	if len(up.Requests()) != 0 {
		t.Fatal("ctxpress's own paths were forwarded")
	}
}
