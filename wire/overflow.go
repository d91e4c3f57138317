package wire

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// overflowCodes are the error codes and types that mean "longer than the
// context window" whatever the message says.
var overflowCodes = []string{
	"context_length_exceeded",   // OpenAI, Azure OpenAI
	"exceed_context_size_error", // llama.cpp's llama-server
	"contextwindowexceedederror",
}

// overflowWords are the lower-cased message wordings of the same, by
// server (the table test cites a real answer for each).
var overflowWords = []string{
	"maximum context length",                       // OpenAI, vLLM: "This model's maximum context length is N tokens"
	"exceeds the available context size",           // llama.cpp 400
	"context size has been exceeded",               // llama.cpp 500: the slots' shared KV cache is full
	"exceeds the context window",                   // OpenAI Responses, gpt-5: "Your input exceeds the context window of this model"
	"exceed context window",                        // llama-cpp-python: "Requested tokens (N) exceed context window of M"
	"prompt is too long",                           // Anthropic: "prompt is too long: N tokens > M maximum"
	"exceed context limit",                         // Anthropic: "input length and `max_tokens` exceed context limit"
	"greater than the context length",              // LM Studio: "The number of tokens to keep from the initial prompt is greater than the context length"
	"when context the overflows",                   // LM Studio: "Trying to keep the first N tokens when context the overflows"
	"cannot truncate prompt with n_keep",           // LM Studio / llama.cpp: "Cannot truncate prompt with n_keep (N) >= n_ctx (M)"
	"exceeds the context length",                   // Ollama: "the input length exceeds the context length"
	"longer than the maximum model length",         // vLLM: "The decoder prompt (length N) is longer than the maximum model length of M"
	"contextwindowexceedederror",                   // LiteLLM: "litellm.ContextWindowExceededError: …"
	"input tokens exceed the configured limit",     // Azure OpenAI gpt-5: "Input tokens exceed the configured limit of 272000 tokens"
	"exceeds the maximum number of tokens allowed", // Gemini: "The input token count exceeds the maximum number of tokens allowed"
}

// IsContextOverflow reports whether an upstream answer refuses a request as
// longer than the model's context window: OpenAI's context_length_exceeded,
// llama.cpp's 400 exceed_context_size_error and its 500 "Context size has
// been exceeded." (several slots sharing one KV cache), Anthropic's "prompt
// is too long", and the wordings of LM Studio, vLLM, Ollama, LiteLLM,
// Azure and Gemini. Only error answers count: a 2xx is never an overflow
// whatever its content says, nor is a 429 (a rate limit on tokens per
// minute is not a window). body may be any bytes.
func IsContextOverflow(status int, body []byte) bool {
	if status < 400 || status == 429 {
		return false
	}
	var code, typ, msg string
	if jsonvalid.Valid(body) {
		root := gjson.ParseBytes(body)
		if root.IsArray() {
			root = root.Get("0") // Gemini answers errors as a list of one
		}
		code = root.Get("error.code").String()
		typ = firstOf(root, "error.type", "type").String()
		msg = firstOf(root, "error.message", "error", "message", "detail").String()
	} else {
		msg = string(body) // plain-text errors from local servers and gateways
	}
	code, typ, msg = strings.ToLower(code), strings.ToLower(typ), strings.ToLower(msg)
	for _, c := range overflowCodes {
		if code == c || typ == c {
			return true
		}
	}
	return hasAny(msg, overflowWords)
}

// hasAny reports whether s contains one of subs.
func hasAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// firstOf returns the first of paths present in r.
func firstOf(r gjson.Result, paths ...string) gjson.Result {
	for _, p := range paths {
		if v := r.Get(p); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

// overflowSizes find the window and the request's size in an overflow
// answer's message, each as (pattern, index of the limit group, index of
// the size group).
var overflowSizes = []struct {
	re          *regexp.Regexp
	limit, size int
}{
	// OpenAI, vLLM: "maximum context length is 8192 tokens. However, you requested 9000 tokens"
	{regexp.MustCompile(`maximum context length is (\d+) tokens?.*?(?:requested|resulted in) (\d+) tokens`), 1, 2},
	// Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
	{regexp.MustCompile(`(\d+) tokens > (\d+) maximum`), 2, 1},
	// llama-cpp-python: "Requested tokens (5000) exceed context window of 4096"
	{regexp.MustCompile(`requested tokens \((\d+)\) exceed context window of (\d+)`), 2, 1},
	// vLLM: "The decoder prompt (length 5000) is longer than the maximum model length of 4096"
	{regexp.MustCompile(`\(length (\d+)\) is longer than the maximum model length of (\d+)`), 2, 1},
}

// OverflowSize reads, from an answer IsContextOverflow accepts, the
// model's window and the size the server counted for the refused request,
// in the server's own tokens: llama.cpp's n_ctx and n_prompt_tokens, or
// the numbers in OpenAI's, vLLM's or Anthropic's message. ok is false when
// the answer does not say (llama.cpp's 500 for a shared KV cache, LM
// Studio): then the request may well fit on its own.
func OverflowSize(body []byte) (window, size int, ok bool) {
	msg := string(body)
	if jsonvalid.Valid(body) {
		root := gjson.ParseBytes(body)
		if root.IsArray() {
			root = root.Get("0")
		}
		e := root.Get("error")
		if n, p := e.Get("n_ctx").Int(), e.Get("n_prompt_tokens").Int(); n > 0 && p > 0 {
			return int(n), int(p), true
		}
		msg = firstOf(root, "error.message", "error", "message", "detail").String()
	}
	msg = strings.ToLower(msg)
	for _, o := range overflowSizes {
		if m := o.re.FindStringSubmatch(msg); m != nil {
			limit, _ := strconv.Atoi(m[o.limit])
			size, _ := strconv.Atoi(m[o.size])
			if limit > 0 && size > 0 {
				return limit, size, true
			}
		}
	}
	return 0, 0, false
}
