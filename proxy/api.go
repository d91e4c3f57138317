package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/geminipath"
	"github.com/ctxpress/ctxpress/turn"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/gemini"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
)

// api is one wire format of conversation requests as the shell serves it:
// the few things a turn does differently per format. Everything else of a
// turn (parse, identify, plan, compact, forward, record, tell) is the same
// code for every format; adding a format is adding an api.
type api struct {
	// turn is what a turn needs of the format: its name (also the
	// summary call's API when the summariser is the conversation's own
	// upstream), its wire.Format, and the body fields that reserve room
	// for the answer.
	turn turn.API
	// streamAsks reports what a forwarded request (its path, its body)
	// asks of its answer: a stream, and usage in that stream.
	streamAsks func(path, body []byte) (stream, usage bool)
	// pathModel: the path names the model and the method (Gemini's
	// /v1beta/models/{model}:streamGenerateContent), so a turn's format
	// carries the model (turnOf) and the method says whether it streams.
	pathModel bool
	// arrayReply, when set, renders ctxpress's own answer to a stream
	// asked for without SSE (Gemini without alt=sse: one JSON array,
	// streamed under application/json, which relayAnswer relays as a
	// stream).
	arrayReply func(model, text string, now time.Time) wire.Reply
	// parseSeesStream: the format's parse reads "stream" as streamAsks
	// does (the first member, as gjson), so a turn it parsed as not
	// streamed asks for no stream and its body is not read for it again.
	parseSeesStream bool
	// askStreamUsage, when set, makes a streamed body ask for its usage
	// and reports whether it changed the body (chat's
	// stream_options.include_usage; the usage chunk the client did not ask
	// for is stripped on the way); streamOptionsRefused recognises an
	// upstream that refuses the change. nil for a format whose streams
	// always carry their usage.
	askStreamUsage       func(body []byte) (out []byte, changed bool)
	streamOptionsRefused func(status int, answer []byte) bool
	// usageFromJSON reads usage from a whole answer, as plain bytes.
	usageFromJSON func(body []byte) wire.Usage
	// watch returns a watcher of a stream's side copy: its usage, and
	// whether it ended as a whole answer.
	watch func() streamWatch
	// streamStart, when set, returns a reader of a stream's first events
	// for a refusal sent inside a 200 stream (Responses: OpenAI's
	// response.failed before any output), which forward holds back until
	// it knows; nil for a format whose upstreams refuse with a status.
	streamStart func() streamStarter
	// reply renders ctxpress's own answer (to "/compact") in the format.
	reply func(model, text string, stream bool, now time.Time) wire.Reply
	// errors renders ctxpress's own errors (502, 504, 413, 401, 500) in
	// the shape the format's clients read; the upstream's own errors pass
	// through as sent.
	errors errorShape
}

// streamWatch reads a side copy of a streamed answer; it never changes the
// bytes the client gets.
type streamWatch interface {
	Observe(p []byte)
	Usage() wire.Usage
	// unfinished says why a stream the upstream ended is not a whole
	// answer (it is then no turn to record); nil when it is one.
	unfinished() error
}

// streamStarter reads a stream's first bytes until it has Decided
// whether the upstream refused the request in it (Refusal: the refusal as
// an error body; nil: it did not).
type streamStarter interface {
	Feed(p []byte)
	Decided() bool
	Refusal() []byte
}

var (
	// chatAPI is OpenAI chat completions (POST /v1/chat/completions).
	chatAPI = &api{
		turn:       turn.API{Name: compaction.APIChat, Format: chat.Format{}, OutputCaps: []string{"max_completion_tokens", "max_tokens"}},
		streamAsks: bodyAsks(chat.StreamAsks), parseSeesStream: true,
		askStreamUsage: chat.EnsureStreamUsage, streamOptionsRefused: chat.StreamOptionsRefused,
		usageFromJSON: chat.UsageFromJSON,
		watch:         func() streamWatch { return &chatWatch{} },
		reply:         chat.AssistantReply,
		errors:        openAIShape,
	}
	// responsesAPI is the OpenAI Responses API (POST /v1/responses), what
	// codex ≥ 0.98 speaks.
	responsesAPI = &api{
		turn:          turn.API{Name: compaction.APIResponses, Format: responses.Format{}, OutputCaps: []string{"max_output_tokens"}},
		streamAsks:    bodyAsks(responses.StreamAsks),
		usageFromJSON: responses.UsageFromJSON,
		watch:         func() streamWatch { return &responsesWatch{} },
		streamStart:   func() streamStarter { return &responses.StreamStart{} },
		reply:         responses.AssistantReply,
		errors:        openAIShape,
	}
	// messagesAPI is Anthropic Messages (POST /v1/messages, any query such
	// as Claude Code's ?beta=true), what Claude Code speaks. Its streams
	// carry their usage; its errors are Anthropic's.
	messagesAPI = &api{
		turn:          turn.API{Name: compaction.APIMessages, Format: messages.Format{}, OutputCaps: []string{"max_tokens"}},
		streamAsks:    bodyAsks(messages.StreamAsks),
		usageFromJSON: messages.UsageFromJSON,
		watch:         func() streamWatch { return &messagesWatch{} },
		reply:         messages.AssistantReply,
		errors:        anthropicShape,
	}
	// geminiAPI is Google's Gemini API (POST
	// /v1beta/models/{model}:generateContent and :streamGenerateContent,
	// under /v1 too), what Gemini CLI and the genai SDKs speak. Its
	// streams carry their usage, as SSE (alt=sse) or one JSON array; its
	// errors are Google's.
	geminiAPI = &api{
		turn: turn.API{Name: compaction.APIGemini, Format: gemini.Format{},
			OutputCaps: []string{"generationConfig.maxOutputTokens", "generation_config.max_output_tokens"}},
		streamAsks: func(path, _ []byte) (bool, bool) { return gemini.StreamAsks(path) }, pathModel: true,
		usageFromJSON: gemini.UsageFromJSON,
		watch:         func() streamWatch { return &geminiWatch{} },
		reply:         gemini.AssistantReply, arrayReply: gemini.ArrayReply,
		errors: googleShape,
	}
)

// bodyAsks is streamAsks of a format whose body says it.
func bodyAsks(asks func(body []byte) (stream, usage bool)) func(path, body []byte) (bool, bool) {
	return func(_, body []byte) (bool, bool) { return asks(body) }
}

// turnOf is what a turn of a request on path needs of a: the format's, or
// for a format whose path names the model, the same with the model.
func (a *api) turnOf(path []byte) *turn.API {
	if !a.pathModel {
		return &a.turn
	}
	c, _ := geminipath.Parse(path)
	t := a.turn
	t.Format = gemini.Format{Model: c.Model, Stream: c.Stream()}
	return &t
}

// apiPaths are the conversation endpoints, by path after the base URL.
// /v1/responses/compact, /v1/responses/input_tokens,
// /v1/messages/count_tokens (Claude Code counts raw file text there: the
// upstream's count of what it sent is the answer it wants) and every other
// path pass through.
var apiPaths = map[string]*api{pathChatCompletions: chatAPI, pathResponses: responsesAPI, pathMessages: messagesAPI}

// apiOf returns the api of a request path, with or without the /v1
// prefix, or a Gemini model's generateContent or streamGenerateContent
// (its countTokens and every other method pass through); nil for a path
// that is no conversation endpoint.
func apiOf(path []byte) *api {
	if a := apiPaths[string(withoutV1(path))]; a != nil {
		return a
	}
	if c, ok := geminipath.Parse(path); ok && c.Turn() {
		return geminiAPI
	}
	return nil
}

// withoutV1 is path without its /v1 prefix: /v1/X and a bare /X are the
// same endpoint.
func withoutV1(path []byte) []byte {
	if bytes.HasPrefix(path, []byte("/v1/")) {
		return path[len("/v1"):]
	}
	return path
}

// messagesPath reports whether path (with or without /v1) is Anthropic's
// Messages API or under it (count_tokens, batches): its clients read
// Anthropic's errors and send their key as x-api-key.
func messagesPath(path []byte) bool {
	rest, ok := bytes.CutPrefix(withoutV1(path), []byte(pathMessages))
	return ok && (len(rest) == 0 || rest[0] == '/')
}

// chatWatch is a chat stream's watcher: usage from any chunk that has it.
// A chat stream that ends has said all it will (its end, [DONE], is
// optional on many servers), so it is never unfinished.
type chatWatch struct{ chat.SSEUsage }

func (*chatWatch) unfinished() error { return nil }

// errStreamUnfinished marks a Responses stream that ended without
// response.completed: cut short, or failed, it is not a turn to record.
var errStreamUnfinished = errors.New("the upstream's stream ended without response.completed")

// responsesWatch is a Responses stream's watcher: usage from the event that
// ends the response, which must be response.completed.
type responsesWatch struct{ responses.StreamWatch }

func (w *responsesWatch) unfinished() error {
	switch end := w.End(); {
	case w.Completed():
		return nil
	case end == "":
		return errStreamUnfinished
	default:
		return fmt.Errorf("%w: it ended with %s", errStreamUnfinished, end)
	}
}

// errGeminiUnfinished marks a Gemini stream that ended before a chunk
// with a finishReason: cut short, or ended by an error, it is not a turn
// to record.
var errGeminiUnfinished = errors.New("the upstream's stream ended without a finishReason")

// geminiWatch is a Gemini stream's watcher, SSE or a JSON array: usage
// from the last chunk that has it, and whether one finished the answer.
type geminiWatch struct{ gemini.StreamWatch }

func (w *geminiWatch) unfinished() error {
	switch {
	case w.Completed():
		return nil
	case w.Errored():
		return fmt.Errorf("%w: it carried an error", errGeminiUnfinished)
	}
	return errGeminiUnfinished
}

// errMessagesUnfinished marks a Messages stream that ended without
// message_stop: cut short, or ended by an error event, it is not a turn to
// record.
var errMessagesUnfinished = errors.New("the upstream's stream ended without message_stop")

// messagesWatch is a Messages stream's watcher: usage from message_start
// and the cumulative message_delta (input, cache read, cache write), and
// whether message_stop came.
type messagesWatch struct{ messages.StreamWatch }

func (w *messagesWatch) unfinished() error {
	switch {
	case w.Completed():
		return nil
	case w.Ended():
		return fmt.Errorf("%w: it ended with an error event", errMessagesUnfinished)
	}
	return errMessagesUnfinished
}
