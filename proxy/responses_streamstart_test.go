package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/responsestest"
)

// What a client gets of a Responses stream whose start ctxpress held back
// (for a refusal inside it) is what the upstream sent, byte for byte and
// to its end: an answer sent one event per write, one sent in a single
// write, and a stream that failed at its start for another reason than
// its length (relayed as sent, not sent again).
func TestResponsesStreamStartIsRelayedAsSent(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	start := []string{
		ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"model":"gpt-5","output":[],"usage":null}}`),
		ev("response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"model":"gpt-5","output":[],"usage":null}}`),
	}
	message := `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[]}]}`
	answer := append(append([]string{}, start...),
		ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":`+message+`}`),
		ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Done."}`),
		ev("response.output_item.done", `{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":`+message+`}`),
		ev("response.completed", `{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"completed","error":null,"model":"gpt-5","output":[`+message+`],"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":42}}}`))
	failed := append(append([]string{}, start...),
		ev("response.failed", `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error while processing your request."},"model":"gpt-5","output":[],"usage":null}}`))
	body := `{"model":"gpt-5","input":[{"type":"message","role":"user","content":"Fix the leap-year bug."}],"stream":true,"store":false}`
	for name, writes := range map[string][]string{
		"answer, an event per write":           answer,
		"answer, one write":                    {strings.Join(answer, "")},
		"failed at its start, not as too long": failed,
	} {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				got, _ := io.ReadAll(r.Body)
				if _, rerr := responsestest.Check(got, responsestest.Options{}); rerr != nil {
					answerJSON(w, rerr.Status, rerr.Body())
					return
				}
				w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
				for _, p := range writes {
					_, _ = io.WriteString(w, p)
					w.(http.Flusher).Flush()
				}
			}))
			t.Cleanup(up.Close)
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, compactionConfig(up.URL+"/v1"), deps) // compaction on: a refusal could be rescued
			req, _ := http.NewRequest(http.MethodPost, p.BaseURL()+"/responses", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-agent")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || string(got) != strings.Join(writes, "") {
				t.Fatalf("%d, %v: the client got\n%s\nthe upstream sent\n%s", resp.StatusCode, err, got, strings.Join(writes, ""))
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("the upstream got %d requests, want 1", n)
			}
		})
	}
}

// An upstream that compresses a stream ctxpress asked for uncompressed
// (Accept-Encoding: identity) sends events ctxpress cannot read: nothing of
// it is held back. The upstream here sends its first bytes and waits for
// the client to have them before it sends the rest; a held stream would
// wait for the rest first, and neither would move.
func TestCompressedResponsesStreamIsNotHeld(t *testing.T) {
	var first, rest bytes.Buffer
	zw := gzip.NewWriter(&first)
	_, _ = io.WriteString(zw, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
	_ = zw.Flush()
	n := first.Len()
	_, _ = io.WriteString(zw, "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed.\"},\"output\":[]}}\n\n")
	_ = zw.Close()
	rest.Write(first.Bytes()[n:])
	first.Truncate(n)

	clientHasFirst := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("ctxpress asked for %q, not identity", r.Header.Get("Accept-Encoding"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(first.Bytes())
		w.(http.Flusher).Flush()
		select {
		case <-clientHasFirst:
		case <-time.After(5 * time.Second):
			t.Error("the client did not get the stream's first bytes before its end")
		}
		_, _ = w.Write(rest.Bytes())
	}))
	t.Cleanup(up.Close)
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, compactionConfig(up.URL+"/v1"), deps)
	req, _ := http.NewRequest(http.MethodPost, p.BaseURL()+"/responses",
		strings.NewReader(`{"model":"gpt-5","input":[{"type":"message","role":"user","content":"Fix the leap-year bug."}],"stream":true,"store":false}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-agent")
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport leaves the body as sent
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, first.Len())
	if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, first.Bytes()) {
		t.Fatalf("first bytes %x, %v; want %x", got, err, first.Bytes())
	}
	close(clientHasFirst)
	tail, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(tail, rest.Bytes()) {
		t.Fatalf("the rest: %x, %v; want %x", tail, err, rest.Bytes())
	}
}
