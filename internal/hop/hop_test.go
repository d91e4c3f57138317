package hop

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// removeHopHeaders drops every hop-by-hop header and those a Connection
// header names, present or not: what ctxpress did before it looked which
// are present, the reference Remove of the present ones must equal.
func removeHopHeaders(h Header) { Remove(h, All) }

func TestHopOfKnowsEveryHopByHopHeaderInAnyCase(t *testing.T) {
	for _, row := range []struct {
		name string
		hop  bool
	}{
		{"Connection", true},
		{"connection", true},
		{"PROXY-CONNECTION", true},
		{"Keep-Alive", true},
		{"Proxy-Authenticate", true},
		{"proxy-authorization", true},
		{"TE", true},
		{"Trailer", true},
		{"Transfer-Encoding", true},
		{"upgrade", true},
		{"Trailers", false}, // a longer name is another header
		{"T", false},        // so is a shorter one
		{"Authorization", false},
		{"X-Connection", false},
		{"", false},
	} {
		if got := Of([]byte(row.name)) != 0; got != row.hop {
			t.Errorf("Of(%q) != 0 is %v, want %v", row.name, got, row.hop)
		}
	}
}

// The requests and answers whose hop-by-hop headers the proxy removes: one
// hop header at a time, several, in other cases, named by Connection, an
// HTTP/1.0 connection that closes without saying so, a folded line, a
// chunked body with trailers.
var hopHeaderBlocks = []string{
	"Content-Type: application/json\r\nAuthorization: Bearer k\r\n",
	"Connection: keep-alive\r\n",
	"Connection: close\r\n",
	"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nX-Other: 2\r\n",
	"connection: X-A ,x-b\r\nX-A: 1\r\nx-b: 2\r\nKeep-Alive: timeout=5\r\n",
	"Keep-Alive: timeout=5\r\n",
	"Proxy-Connection: keep-alive\r\n",
	"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Authenticate: Basic\r\n",
	"TE: trailers\r\nX-End: kept\r\n",
	"Upgrade: websocket\r\nConnection: Upgrade\r\n",
	"X-Folded: a\r\n b\r\nTe: trailers\r\n",
	"Trailer: X-Sum\r\n",
}

func TestRemovingOnlyThePresentHopHeadersOfARequestRemovesWhatRemovingAllDoes(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		for _, block := range hopHeaderBlocks {
			for _, body := range []string{"Content-Length: 2\r\n\r\n{}", "Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n2\r\n{}\r\n0\r\nX-Sum: 1\r\nUpgrade: x\r\n\r\n"} {
				raw := "POST /v1/embeddings " + proto + "\r\nHost: h\r\n" + block + body
				var req fasthttp.Request
				if proto == "HTTP/1.0" && strings.Contains(body, "chunked") {
					continue // not HTTP/1.0 (fasthttp refuses it)
				}
				if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
					t.Fatalf("%q: %v", raw, err)
				}
				var all, present fasthttp.RequestHeader
				req.Header.CopyTo(&all)
				req.Header.CopyTo(&present)
				removeHopHeaders(&all)
				Remove(&present, OfRequest(&req.Header))
				if a, p := all.String(), present.String(); a != p {
					t.Errorf("%q:\nall removed:\n%s\npresent removed:\n%s", raw, a, p)
				}
			}
		}
	}
}

func TestRemovingOnlyThePresentHopHeadersOfAnAnswerRemovesWhatRemovingAllDoes(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		for _, block := range hopHeaderBlocks {
			for _, body := range []string{"Content-Length: 2\r\n\r\n{}", "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"} {
				raw := proto + " 200 OK\r\nServer: up\r\n" + block + body
				var resp fasthttp.Response
				if err := resp.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
					t.Fatalf("%q: %v", raw, err)
				}
				var all, present fasthttp.ResponseHeader
				resp.Header.CopyTo(&all)
				resp.Header.CopyTo(&present)
				removeHopHeaders(&all)
				Remove(&present, OfAnswer(&resp.Header))
				if a, p := all.String(), present.String(); a != p {
					t.Errorf("%q:\nall removed:\n%s\npresent removed:\n%s", raw, a, p)
				}
			}
		}
	}
}

// BenchmarkClientHops is the hop-by-hop removal of a pass-through request
// (no hop header but Connection: keep-alive), as buildUpstreamRequest does
// it, beside removing every one of them whatever the request holds.
func BenchmarkClientHops(b *testing.B) {
	raw := "POST /v1/embeddings HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n" +
		"User-Agent: bench\r\nAccept: */*\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	var h fasthttp.RequestHeader
	b.Run("present", func(b *testing.B) {
		for b.Loop() {
			req.Header.CopyTo(&h)
			Remove(&h, OfRequest(&req.Header))
		}
	})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			req.Header.CopyTo(&h)
			removeHopHeaders(&h)
		}
	})
}
