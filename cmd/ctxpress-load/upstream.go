package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// fakeUpstream is a fast OpenAI-compatible chat server: whole JSON answers
// with usage, or SSE chunks flushed one by one with a usage chunk when asked
// and [DONE]. It answers at once, so what is measured is the path in front
// of it, not a model.
type fakeUpstream struct {
	srv        *fasthttp.Server
	ln         net.Listener
	chats      atomic.Int64
	summaries  atomic.Int64
	embeddings atomic.Int64
}

// embeddingAnswer is a small embeddings answer: ctxpress forwards that path
// untouched, so it measures the bare proxy.
const embeddingAnswer = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023064255,-0.009327292,0.015797347,-0.0077780345,-0.0046922187]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`

func startUpstream() (*fakeUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &fakeUpstream{ln: ln}
	u.srv = &fasthttp.Server{Handler: u.handle, ReadBufferSize: 64 << 10, MaxRequestBodySize: 256 << 20,
		NoDefaultServerHeader: true, NoDefaultDate: true}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// BaseURL is what a client uses as its OpenAI base URL.
func (u *fakeUpstream) BaseURL() string { return "http://" + u.ln.Addr().String() + "/v1" }

func (u *fakeUpstream) Addr() string { return u.ln.Addr().String() }

func (u *fakeUpstream) Close() { _ = u.srv.Shutdown() }

const replyText = "I ran the command and read its output. The failure is in the parser; next I will open the file and fix the condition."

func (u *fakeUpstream) handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	if strings.HasSuffix(path, "/embeddings") && ctx.IsPost() {
		u.embeddings.Add(1)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(embeddingAnswer)
		return
	}
	if !strings.HasSuffix(path, "/chat/completions") || !ctx.IsPost() {
		ctx.SetStatusCode(404)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"not found","type":"invalid_request_error"}}`)
		return
	}
	body := ctx.Request.Body()
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		ctx.SetStatusCode(400)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"messages must be an array","type":"invalid_request_error"}}`)
		return
	}
	// One token per 4 bytes of messages, as a rough tokenizer would count.
	prompt := len(msgs.Raw)/4 + 1
	model := gjson.GetBytes(body, "model").String()
	text := replyText
	if isSummaryCall(msgs) {
		u.summaries.Add(1)
		text = "## Goal\\nFix the failing build.\\n\\n## Completed Actions\\n1. Ran the build: parser error.\\n\\n## Active Task\\nFix the parser condition."
	} else {
		u.chats.Add(1)
	}
	words := strings.Fields(text)
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, len(words), prompt+len(words))
	if !gjson.GetBytes(body, "stream").Bool() {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"chatcmpl-load","object":"chat.completion","created":1715367049,"model":"` + model +
			`","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}],"usage":` + usage + `}`)
		return
	}
	includeUsage := gjson.GetBytes(body, "stream_options.include_usage").Bool()
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		var b bytes.Buffer
		chunk := func(delta string, finish string) {
			b.Reset()
			b.WriteString(`data: {"id":"chatcmpl-load","object":"chat.completion.chunk","created":1715367049,"model":"`)
			b.WriteString(model)
			b.WriteString(`","choices":[{"index":0,"delta":`)
			b.WriteString(delta)
			b.WriteString(`,"finish_reason":`)
			b.WriteString(finish)
			b.WriteString("}]}\n\n")
			_, _ = w.Write(b.Bytes())
		}
		chunk(`{"role":"assistant","content":""}`, "null")
		_ = w.Flush()
		// Words in three flushed groups: a stream that really arrives in
		// pieces, without paying a syscall per word.
		per := (len(words) + 2) / 3
		for i := 0; i < len(words); i += per {
			for j := i; j < min(i+per, len(words)); j++ {
				word := words[j]
				if j > 0 {
					word = " " + word
				}
				chunk(`{"content":"`+word+`"}`, "null")
			}
			if err := w.Flush(); err != nil {
				return
			}
		}
		chunk(`{}`, `"stop"`)
		if includeUsage {
			_, _ = w.WriteString(`data: {"id":"chatcmpl-load","object":"chat.completion.chunk","created":1715367049,"model":"` + model +
				`","choices":[],"usage":` + usage + "}\n\n")
		}
		_, _ = w.WriteString("data: [DONE]\n\n")
		_ = w.Flush()
	})
}

// isSummaryCall tells ctxpress's summary calls from agent turns: the last
// message is the user's with the summary instruction, in either form (a
// transcript, or the conversation's own history with the instruction
// appended, which a summary that reuses the prompt cache sends).
func isSummaryCall(msgs gjson.Result) bool {
	all := msgs.Array()
	if len(all) == 0 {
		return false
	}
	last := all[len(all)-1]
	return last.Get("role").String() == "user" && compactor.IsSummaryPrompt(last.Get("content").String())
}
