package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// rawUpstream is an HTTP/1.1 upstream on 127.0.0.1 that keeps each
// request's header lines as they came, in order (net/http's Header is a
// map: it cannot tell an order), and answers every request with a small
// Anthropic message.
type rawUpstream struct {
	ln net.Listener
	mu sync.Mutex
	// requests are the request lines and header lines, one slice each.
	requests [][]string
}

func newRawUpstream(t *testing.T) *rawUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

func (u *rawUpstream) BaseURL() string { return "http://" + u.ln.Addr().String() + "/v1" }

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		var lines []string
		length := 0
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			if line == "" {
				break
			}
			if k, v, ok := strings.Cut(line, ": "); ok && strings.EqualFold(k, "Content-Length") {
				length, _ = strconv.Atoi(v)
			}
			lines = append(lines, line)
		}
		if _, err := io.CopyN(io.Discard, r, int64(length)); err != nil {
			return
		}
		u.mu.Lock()
		u.requests = append(u.requests, lines)
		u.mu.Unlock()
		const answer = `{"id":"msg_raw","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
	}
}

func (u *rawUpstream) last(t *testing.T) []string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.requests) == 0 {
		t.Fatal("the upstream got no request")
	}
	return u.requests[len(u.requests)-1]
}

// rawPost sends one request with header lines exactly as given, in order,
// and returns the answer's status.
func rawPost(t *testing.T, addr, target string, header []string, body string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%s\r\nContent-Length: %d\r\n\r\n%s", target, addr, strings.Join(header, "\r\n"), len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// fasthttp writes these first whatever their place, and ctxpress sets or
// drops them (the upstream's host, the body's length, hop-by-hop ones).
var movedHeaders = map[string]bool{"host": true, "content-length": true, "content-type": true, "user-agent": true, "connection": true}

// Every header Claude Code sends reaches the upstream, in the order it sent
// them, with its value as sent: anthropic-beta (its list in its order, and
// a second anthropic-beta line after the first), anthropic-version,
// x-api-key, X-Claude-Code-Session-Id, every X-Stainless-*; only the
// stream's Accept-Encoding is identity (ctxpress reads the stream). The
// query (?beta=true) goes along.
func TestMessagesHeadersReachTheUpstreamInOrder(t *testing.T) {
	up := newRawUpstream(t)
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	var sent []string
	for _, h := range claudeCodeHeaders(t) {
		sent = append(sent, h[0]+": "+h[1])
	}
	sent = append(sent, "Accept-Encoding: gzip, deflate, br, zstd", "anthropic-beta: fine-grained-tool-streaming-2025-05-14", "X-Stainless-Helper-Method: stream")
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"claude-opus-5-5","max_tokens":1024,"messages":[{"role":"user","content":"List the files."}],"stream":%v}`, stream)
		if status := rawPost(t, strings.TrimPrefix(p.URL, "http://"), "/v1/messages?beta=true", sent, body); status != http.StatusOK {
			t.Fatalf("stream %v: status %d", stream, status)
		}
		got := up.last(t)
		if got[0] != "POST /v1/messages?beta=true HTTP/1.1" {
			t.Errorf("request line %q", got[0])
		}
		var want, have []string
		for _, l := range sent {
			if k, _, _ := strings.Cut(l, ": "); !movedHeaders[strings.ToLower(k)] {
				want = append(want, strings.ToLower(l))
			}
		}
		for _, l := range got[1:] {
			if k, _, _ := strings.Cut(l, ": "); !movedHeaders[strings.ToLower(k)] {
				have = append(have, strings.ToLower(l))
			}
		}
		if stream {
			for i, l := range want {
				if strings.HasPrefix(l, "accept-encoding: ") {
					want[i] = "accept-encoding: identity"
				}
			}
		}
		if strings.Join(have, "\n") != strings.Join(want, "\n") {
			t.Errorf("stream %v: the upstream got\n%s\nwant\n%s", stream, strings.Join(have, "\n"), strings.Join(want, "\n"))
		}
	}
}
