package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/tidwall/gjson"
)

// Refusal bodies exactly as api.openai.com sends them for a reasoning model
// (o1, o3, o4-mini, gpt-5…); %s is the temperature as sent.
const (
	MaxTokensRefusal   = `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`
	TemperatureRefusal = `{"error":{"message":"Unsupported value: 'temperature' does not support %s with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`
)

// chatParams are the top-level keys OpenAI's chat completions accept; any
// other is refused as "Unrecognized request argument supplied".
var chatParams = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true, "temperature": true, "top_p": true,
	"n": true, "stop": true, "max_tokens": true, "max_completion_tokens": true, "presence_penalty": true,
	"frequency_penalty": true, "logit_bias": true, "logprobs": true, "top_logprobs": true, "user": true,
	"tools": true, "tool_choice": true, "parallel_tool_calls": true, "response_format": true, "seed": true,
	"reasoning_effort": true, "verbosity": true, "store": true, "metadata": true, "prompt_cache_key": true,
	"safety_identifier": true, "service_tier": true, "modalities": true, "audio": true, "prediction": true,
	"web_search_options": true,
}

// StrictOpenAI answers chat completions as strictly as api.openai.com: an
// unknown top-level key is refused for every model, and for a model that
// isReasoning names, max_tokens is refused (checked first), then any
// temperature but 1, each with OpenAI's own 400 body. Anything else gets a
// completion whose text is reply.
func StrictOpenAI(isReasoning func(model string) bool, reply string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		refuse := func(b string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, b)
		}
		if !gjson.ValidBytes(body) || !gjson.GetBytes(body, "messages").IsArray() {
			refuse(`{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		var unknown string
		gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
			if !chatParams[k.String()] {
				unknown = k.String()
			}
			return unknown == ""
		})
		if unknown != "" {
			refuse(fmt.Sprintf(`{"error":{"message":"Unrecognized request argument supplied: %s","type":"invalid_request_error","param":null,"code":null}}`, unknown))
			return
		}
		model := gjson.GetBytes(body, "model").String()
		if isReasoning(model) {
			if gjson.GetBytes(body, "max_tokens").Exists() {
				refuse(MaxTokensRefusal)
				return
			}
			if t := gjson.GetBytes(body, "temperature"); t.Exists() && t.Float() != 1 {
				refuse(fmt.Sprintf(TemperatureRefusal, t.Raw))
				return
			}
		}
		content, _ := json.Marshal(reply)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-strict","object":"chat.completion","created":1715367049,"model":%q,`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			model, content, PromptTokens(body), 50, PromptTokens(body)+50)
	}
}
