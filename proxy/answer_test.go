package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// chatServer is an upstream that answers chat completions the way the
// servers each test names do, and is as strict as they are: the usage chunk
// only when include_usage asks for it, compression only when the request
// accepts it.
type chatServer struct {
	*httptest.Server
	reply string
	// eol ends every SSE line: "\n" when empty, "\r\n", or "\r" alone.
	eol string
	// gzip compresses any answer whose request accepts gzip, flushing the
	// compressor after every event, as a CDN compressing on the fly does.
	gzip bool
	// forbidExtra answers a stream_options field as a pydantic model with
	// extra="forbid" does: 422 extra_forbidden.
	forbidExtra bool
	// afterEvent, when set, runs after content event i has been flushed;
	// the stream goes on when it returns.
	afterEvent func(r *http.Request, i int)

	mu       sync.Mutex
	requests []openaitest.Request // guarded by mu
}

func newChatServer(t *testing.T, c *chatServer) *chatServer {
	t.Helper()
	if c.reply == "" {
		// Over 2 KiB, so net/http sends a whole answer chunked, as Ollama
		// (a Go server) does.
		c.reply = strings.TrimSpace(strings.Repeat("The build fails in handler.go because handlerFunc is undefined. ", 50))
	}
	if c.eol == "" {
		c.eol = "\n"
	}
	c.Server = httptest.NewServer(c)
	t.Cleanup(c.Close)
	return c
}

func (c *chatServer) BaseURL() string { return c.URL + "/v1" }

func (c *chatServer) received() []openaitest.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]openaitest.Request(nil), c.requests...)
}

func (c *chatServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.requests = append(c.requests, openaitest.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	c.mu.Unlock()
	if c.forbidExtra && gjson.GetBytes(body, "stream_options").Exists() {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-422")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted","input":%s}]}`,
			gjson.GetBytes(body, "stream_options").Raw)
		return
	}
	var out io.Writer = w
	flush := w.(http.Flusher).Flush
	if c.gzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		out = zw
		flush = func() { _ = zw.Flush(); w.(http.Flusher).Flush() }
	}
	model := gjson.GetBytes(body, "model").String()
	prompt := openaitest.PromptTokens(body)
	words := strings.Fields(c.reply)
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, len(words), prompt+len(words))
	if !gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		reply, _ := json.Marshal(c.reply)
		fmt.Fprintf(out, `{"id":"chatcmpl-1","object":"chat.completion","created":1715367049,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":%s}`,
			model, reply, usage)
		// Sent before the handler ends: chunked, without Content-Length, as
		// an on-the-fly compressor (or net/http past 2 KiB) sends it.
		flush()
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	includeUsage := gjson.GetBytes(body, "stream_options.include_usage").Bool()
	event := func(data string) {
		fmt.Fprintf(out, "data: %s%s%s", data, c.eol, c.eol)
		flush()
	}
	usageField := ""
	if includeUsage {
		usageField = `,"usage":null`
	}
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		event(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1715367049,"model":%q,"choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]%s}`,
			model, word, usageField))
		if c.afterEvent != nil {
			c.afterEvent(r, i)
		}
	}
	event(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1715367049,"model":%q,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]%s}`, model, usageField))
	if includeUsage {
		event(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1715367049,"model":%q,"choices":[],"usage":%s}`, model, usage))
	}
	event("[DONE]")
}

// recordAfterShutdown stops the proxy, so that every queued record is
// written, and returns the conversation's record.
func recordAfterShutdown(t *testing.T, p *testProxy, st state.Store, conv string) state.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := st.Get(state.NewKey([]byte("Bearer sk-test-key"), conv))
	if err != nil || !ok {
		t.Fatalf("no record for %s (%v)", conv, err)
	}
	return rec
}

func chatParams(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

// A non-streamed answer sent chunked (Ollama past 2 KiB; a CDN that
// compresses on the fly) still has its usage read: it is what calibration,
// precompaction and the breaker run on.
func TestChunkedJSONAnswerUsageIsRecorded(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		t.Run(map[bool]string{false: "chunked", true: "chunked gzip"}[compressed], func(t *testing.T) {
			up := newChatServer(t, &chatServer{gzip: compressed})
			p, st := startWithStore(t, Config{Upstream: up.BaseURL()})
			client := newOpenAIClient(p.BaseURL())
			got, err := client.Chat.Completions.New(context.Background(), chatParams("Why does the build fail?"),
				option.WithHeader("X-Conversation-ID", "conv-chunked"))
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Message.Content != up.reply {
				t.Fatalf("content %.80q", got.Choices[0].Message.Content)
			}
			reqs := up.received()
			if compressed && !strings.Contains(reqs[0].Header.Get("Accept-Encoding"), "gzip") {
				t.Fatal("the client's Accept-Encoding did not reach the upstream: the answer was not compressed")
			}
			want := openaitest.PromptTokens(reqs[0].Body)
			if int(got.Usage.PromptTokens) != want {
				t.Fatalf("client usage %d, want %d", got.Usage.PromptTokens, want)
			}
			if !strings.Contains(p.logs.String(), fmt.Sprintf(`"input_tokens":%d`, want)) {
				t.Errorf("the access log has no usage: %s", p.logs.String())
			}
			if rec := recordAfterShutdown(t, p, st, "conv-chunked").CurrentLine(); rec.Calibration.LastInput != want || rec.Calibration.Ratio == 0 {
				t.Fatalf("record: last input %d, calibration %v; want %d and a calibration", rec.Calibration.LastInput, rec.Calibration.Ratio, want)
			}
		})
	}
}

// The official client accepts gzip (Go's transport asks for it): ctxpress
// asks the upstream for usage, and the client, which did not, never gets the
// usage-only chunk ({"choices":[]}), which crashes clients that read
// choices[0]; the usage is recorded.
func TestInjectedUsageChunkDoesNotLeakThroughCompressedStream(t *testing.T) {
	up := newChatServer(t, &chatServer{gzip: true, reply: "Hello from a compressing CDN."})
	p, st := startWithStore(t, Config{Upstream: up.BaseURL()})
	client := newOpenAIClient(p.BaseURL())
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("hi"),
		option.WithHeader("X-Conversation-ID", "conv-gzip"))
	var content strings.Builder
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) == 0 {
			t.Fatalf("the client got a chunk without choices it never asked for: %s", chunk.RawJSON())
		}
		content.WriteString(chunk.Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != up.reply {
		t.Fatalf("content %q", content.String())
	}
	sent := up.received()[0]
	if !gjson.GetBytes(sent.Body, "stream_options.include_usage").Bool() {
		t.Fatal("ctxpress did not ask for usage")
	}
	want := openaitest.PromptTokens(sent.Body)
	if rec := recordAfterShutdown(t, p, st, "conv-gzip").CurrentLine(); rec.Calibration.LastInput != want {
		t.Fatalf("recorded input tokens %d, want %d", rec.Calibration.LastInput, want)
	}
}

// A client that asked for usage itself, and accepts gzip, gets its usage
// chunk, and ctxpress records the usage too.
func TestClientAskedUsageIsRecordedFromCompressedStream(t *testing.T) {
	up := newChatServer(t, &chatServer{gzip: true, reply: "Hello again."})
	p, st := startWithStore(t, Config{Upstream: up.BaseURL()})
	client := newOpenAIClient(p.BaseURL())
	params := chatParams("hi")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params,
		option.WithHeader("X-Conversation-ID", "conv-asked"))
	var usage int64
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) == 0 {
			usage = c.Usage.PromptTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := openaitest.PromptTokens(up.received()[0].Body)
	if usage != int64(want) {
		t.Fatalf("the client's usage chunk says %d, want %d", usage, want)
	}
	if rec := recordAfterShutdown(t, p, st, "conv-asked").CurrentLine(); rec.Calibration.LastInput != want {
		t.Fatalf("recorded input tokens %d, want %d", rec.Calibration.LastInput, want)
	}
}

// An upstream that refuses unknown fields (pydantic extra="forbid") answers
// ctxpress's stream_options with 422: the request goes again as the client
// sent it, and later streams to that model are sent without the field.
func TestStrictUpstreamRefusingStreamOptionsStillAnswers(t *testing.T) {
	up := newChatServer(t, &chatServer{forbidExtra: true, reply: "Hello from a strict server."})
	p, _ := startWithStore(t, Config{Upstream: up.BaseURL()})

	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp := postChat(t, context.Background(), p.URL, body)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"content":"Hello"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	reqs := up.received()
	if len(reqs) != 2 || !gjson.GetBytes(reqs[0].Body, "stream_options").Exists() || string(reqs[1].Body) != body {
		t.Fatalf("want the refused request then the client's own; upstream got %d: %q", len(reqs), bodiesOf(reqs))
	}

	client := newOpenAIClient(p.BaseURL())
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("and again"))
	var content strings.Builder
	for stream.Next() {
		content.WriteString(stream.Current().Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != up.reply {
		t.Fatalf("content %q", content.String())
	}
	if reqs := up.received(); len(reqs) != 3 || gjson.GetBytes(reqs[2].Body, "stream_options").Exists() {
		t.Fatalf("the next stream to the model was sent with stream_options again: %q", bodiesOf(reqs))
	}
}

// A refusal ctxpress did not cause is the client's to see: a stream_options
// the client sent itself is never removed, and the upstream's answer comes
// back exactly as sent.
func TestClientsOwnStreamOptionsRefusalIsRelayedAsSent(t *testing.T) {
	up := newChatServer(t, &chatServer{forbidExtra: true})
	p, _ := startWithStore(t, Config{Upstream: up.BaseURL()})
	body := `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	resp := postChat(t, context.Background(), p.URL, body)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted","input":{"include_usage":true}}]}`
	if resp.StatusCode != http.StatusUnprocessableEntity || string(got) != want || resp.Header.Get("X-Request-Id") != "req-422" {
		t.Fatalf("status %d, X-Request-Id %q: %s", resp.StatusCode, resp.Header.Get("X-Request-Id"), got)
	}
	if n := len(up.received()); n != 1 {
		t.Fatalf("upstream got %d requests, want 1", n)
	}
}

func bodiesOf(reqs []openaitest.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, string(r.Body))
	}
	return out
}

// readEvent reads one SSE event whose lines end with a lone CR.
func readCREvent(br *bufio.Reader) (string, error) {
	var ev []byte
	for !bytes.HasSuffix(ev, []byte("\r\r")) {
		b, err := br.ReadByte()
		if err != nil {
			return string(ev), err
		}
		ev = append(ev, b)
	}
	return string(ev), nil
}

// An upstream whose SSE lines end with a lone CR (the spec allows "\r",
// "\n" and "\r\n") sends each event only once the client has read the one
// before: every event must reach the client as it arrives, through the
// filter that strips the usage chunk ctxpress asked for and through the
// watcher that reads a usage chunk the client asked for; and the usage is
// read in both.
func TestCROnlyStreamRelaysEventByEvent(t *testing.T) {
	for _, clientAsks := range []bool{false, true} {
		t.Run(map[bool]string{false: "usage filter", true: "usage watcher"}[clientAsks], func(t *testing.T) {
			const words = 3
			var read [words]chan struct{}
			for i := range read {
				read[i] = make(chan struct{})
			}
			up := newChatServer(t, &chatServer{eol: "\r", reply: "one two three"})
			up.afterEvent = func(r *http.Request, i int) {
				select {
				case <-read[i]:
				case <-r.Context().Done():
				case <-t.Context().Done():
				}
			}
			p, st := startWithStore(t, Config{Upstream: up.BaseURL()})
			body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"count"}]}`
			if clientAsks {
				body = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count"}]}`
			}
			var rest string
			within(t, 10*time.Second, "event-by-event relay of a CR-only stream", func() {
				req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("X-Conversation-ID", "conv-cr")
				req.Header.Set("Authorization", "Bearer sk-test-key")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				br := bufio.NewReader(resp.Body)
				for i := range words {
					ev, err := readCREvent(br)
					if err != nil || !strings.Contains(ev, `"content":`) {
						t.Errorf("event %d: %q, %v", i, ev, err)
						return
					}
					close(read[i])
				}
				b, _ := io.ReadAll(br)
				rest = string(b)
			})
			if t.Failed() {
				return
			}
			if strings.Contains(rest, `"choices":[]`) != clientAsks {
				t.Errorf("usage chunk for a client that asked (%v): %q", clientAsks, rest)
			}
			if !strings.HasSuffix(rest, "data: [DONE]\r\r") {
				t.Errorf("stream end %q", rest)
			}
			want := openaitest.PromptTokens(up.received()[0].Body)
			if rec := recordAfterShutdown(t, p, st, "conv-cr").CurrentLine(); rec.Calibration.LastInput != want {
				t.Fatalf("recorded input tokens %d, want %d", rec.Calibration.LastInput, want)
			}
		})
	}
}
