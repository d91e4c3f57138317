package compaction

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// A summary call on a pooled connection the upstream closed while it sat
// idle (llama-server does within seconds) goes once more on a fresh
// connection: it was never read. The upstream here answers one request per
// connection and closes the connection on the next without a byte, as a
// server that timed out the idle connection does.
func TestSummarizeResendsOnAStaleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var answered, dropped atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if n > 0 {
						dropped.Add(1)
						return // closed on the reused connection, nothing written
					}
					body := `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"## Active Task\nfix the tests"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
					answered.Add(1)
				}
			}(c)
		}
	}()
	s := NewSummarizer()
	req := SummaryRequest{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: "m", Prompt: "summarise", MaxTokens: 256, Timeout: 5 * time.Second}
	for i := range 3 {
		res, err := s.Summarize(context.Background(), req)
		if err != nil || res.Summary.Text == "" {
			t.Fatalf("call %d: %v %q", i, err, res.Summary.Text)
		}
	}
	if answered.Load() != 3 || dropped.Load() != 2 {
		t.Fatalf("answered %d, dropped %d; want 3 answered, the 2 reused connections dropped", answered.Load(), dropped.Load())
	}
}
