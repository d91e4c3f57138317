package wire

import "testing"

// Real answers, one row per server wording; each says where it was seen.
func TestIsContextOverflow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		// llama.cpp llama-server, a request over the slot's context (ggml-org/llama.cpp#19774).
		{"llama.cpp 400 exceed_context_size_error", 400, `{"error":{"code":400,"message":"request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4390,"n_ctx":4096}}`, true},
		// llama.cpp, earlier wording (ggml-org/llama.cpp#15780, oobabooga/textgen#7257).
		{"llama.cpp 400 older wording", 400, `{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}`, true},
		// llama.cpp before the error type existed (containers/ramalama#1914).
		{"llama.cpp 400 invalid_request_error", 400, `{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"invalid_request_error"}}`, true},
		// llama.cpp, slots sharing one KV cache that fills up (ggml-org/llama.cpp#19774, #23652).
		{"llama.cpp 500 shared KV cache", 500, `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`, true},
		// llama-cpp-python's server (fedora-copr/logdetective-website#193).
		{"llama-cpp-python", 400, `{"error":{"message":"Requested tokens (2285) exceed context window of 2048","type":"internal_server_error"}}`, true},
		// OpenAI chat completions (chathub-dev/chathub#126, crewAIInc/crewAI-examples#121).
		{"openai context_length_exceeded", 400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		// OpenAI, gpt-5 family (OpenHands/software-agent-sdk tests; bifrost#4413 via the code corpus).
		{"openai gpt-5 input exceeds the window", 400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`, true},
		// Azure OpenAI, gpt-5 input cap (BerriAI/litellm#15968).
		{"azure configured limit", 400, `{"error":{"message":"Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 509178 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages"}}`, true},
		// Anthropic Messages (sojohnnysaid/project-guide#2, anthropics/claude-code#12186).
		{"anthropic prompt is too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"},"request_id":"req_011CVQe1dLrGNMJyE1ghG1av"}`, true},
		// Anthropic, input plus max_tokens (continuedev/continue#6080).
		{"anthropic input and max_tokens", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 199759 + 8192 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`, true},
		// vLLM (ogx-ai/ogx#4534, vllm-project/vllm#20409).
		{"vllm maximum context length", 400, `{"object":"error","message":"This model's maximum context length is 6048 tokens. However, you requested 6616 tokens (568 in the messages, 6048 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, true},
		// vLLM V1 (xorbitsai/inference#3785, unslothai/unsloth#2666).
		{"vllm decoder prompt", 400, `{"error":{"message":"The decoder prompt (length 17772) is longer than the maximum model length of 16384. Make sure that ` + "`max_model_len`" + ` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}}`, true},
		// LM Studio (lmstudio-ai/lmstudio-bug-tracker#2205, anomalyco/opencode#2259).
		{"lm studio tokens to keep", 400, `{"error":"The number of tokens to keep from the initial prompt is greater than the context length. Try to load the model with a larger context length, or provide a shorter input"}`, true},
		// LM Studio (lmstudio-ai/lmstudio-bug-tracker#237, #546).
		{"lm studio context the overflows", 400, `{"error":"Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}`, true},
		// LM Studio (anomalyco/opencode#11141).
		{"lm studio n_keep", 400, `{"error":"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}`, true},
		// Ollama (nano-step/nano-brain#208); its chat API truncates instead by default.
		{"ollama input length", 400, `{"error":"the input length exceeds the context length"}`, true},
		// LiteLLM proxy (BerriAI/litellm#7259, OpenHands/OpenHands#5350).
		{"litellm ContextWindowExceededError", 400, `{"error":{"message":"litellm.BadRequestError: litellm.ContextWindowExceededError: AnthropicError - {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 200480 tokens > 200000 maximum\"}}\nReceived Model Group=anthropic/claude-3-5-sonnet-20241022","type":null,"param":null,"code":"400"}}`, true},
		// Gemini through its OpenAI endpoint (BerriAI/litellm#18282).
		{"gemini token count", 400, `[{"error":{"code":400,"message":"The input token count exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]`, true},
		// A gateway answering in plain text.
		{"plain text", 502, `upstream said: Context size has been exceeded.`, true},

		// Not overflows.
		{"rate limit on tokens per minute", 429, `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, false},
		{"a 429 even saying context length", 429, `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"rate_limit_exceeded"}}`, false},
		{"auth", 401, `{"error":{"message":"Incorrect API key provided: sk-***. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`, false},
		{"a 500 not about context", 500, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error"}}`, false},
		{"llama.cpp 503 loading", 503, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`, false},
		{"max_tokens too large", 400, `{"error":{"message":"max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you provided 100000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`, false},
		{"a string over the per-message cap", 400, `{"error":{"message":"Invalid 'messages[3].content': string too long. Expected a string with maximum length 10485760, but got a string with length 12000000 instead.","type":"invalid_request_error","param":"messages[3].content","code":"string_above_max_length"}}`, false},
		{"unsupported parameter", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`, false},
		{"a 200 whose tool output mentions it", 200, `{"choices":[{"message":{"role":"assistant","content":"The log says: This model's maximum context length is 4096 tokens; prompt is too long; Context size has been exceeded."}}]}`, false},
		{"a 200 error body", 200, `{"error":{"message":"Context size has been exceeded.","type":"server_error"}}`, false},
		{"empty", 400, ``, false},
		{"not JSON, not about context", 400, `<html>bad request</html>`, false},
	} {
		if got := IsContextOverflow(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("%s: IsContextOverflow(%d) = %v, want %v", tc.name, tc.status, got, tc.want)
		}
	}
}

func TestOverflowSize(t *testing.T) {
	for _, tc := range []struct {
		name         string
		body         string
		window, size int
		ok           bool
	}{
		{"llama.cpp 400", `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2356,"n_ctx":2048}}`, 2048, 2356, true},
		{"OpenAI", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 128000, 130412, true},
		{"vLLM", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5096 tokens (4096 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","code":400}`, 4096, 5096, true},
		{"Anthropic", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210314 tokens > 200000 maximum"}}`, 200000, 210314, true},
		{"llama-cpp-python", `{"error":{"message":"Requested tokens (5000) exceed context window of 4096","type":"invalid_request_error"}}`, 4096, 5000, true},
		{"llama.cpp shared KV 500", `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`, 0, 0, false},
		{"not JSON", `prompt is too long`, 0, 0, false},
	} {
		w, s, ok := OverflowSize([]byte(tc.body))
		if w != tc.window || s != tc.size || ok != tc.ok {
			t.Errorf("%s: OverflowSize = %d, %d, %v; want %d, %d, %v", tc.name, w, s, ok, tc.window, tc.size, tc.ok)
		}
	}
}
