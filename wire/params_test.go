package wire

import "testing"

func TestRulesFor(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		model     string
		reasoning *bool
		want      ParamRules
	}{
		// OpenAI's reasoning families take max_completion_tokens and no temperature.
		{"o1", nil, ReasoningRules},
		{"o1-mini", nil, ReasoningRules},
		{"o1-2024-12-17", nil, ReasoningRules},
		{"o3", nil, ReasoningRules},
		{"o3-mini", nil, ReasoningRules},
		{"o4-mini", nil, ReasoningRules},
		{"gpt-5", nil, ReasoningRules},
		{"gpt-5-mini", nil, ReasoningRules},
		{"gpt-5.1-codex", nil, ReasoningRules},
		{"GPT-5-Nano", nil, ReasoningRules},
		// A provider prefix (LiteLLM, OpenRouter) does not hide the family.
		{"openai/gpt-5-mini", nil, ReasoningRules},
		{"azure/o3-mini", nil, ReasoningRules},
		// Every other model keeps max_tokens and temperature.
		{"gpt-4o", nil, ParamRules{}},
		{"gpt-4.1-mini", nil, ParamRules{}},
		{"gpt-oss-20b", nil, ParamRules{}},
		{"qwen3-coder-30b", nil, ParamRules{}},
		{"olmo-2", nil, ParamRules{}},
		{"o30-local", nil, ParamRules{}}, // a family is a whole name part
		{"gpt-50", nil, ParamRules{}},
		{"", nil, ParamRules{}},
		// The config's word wins over the table, either way.
		{"my-azure-deployment", &yes, ReasoningRules},
		{"gpt-5-mini", &no, ParamRules{}},
	} {
		if got := RulesFor(tc.model, tc.reasoning); got != tc.want {
			t.Errorf("RulesFor(%q, %v) = %+v, want %+v", tc.model, tc.reasoning, got, tc.want)
		}
	}
}

// Real refusals, one row per server wording; each says where it was seen.
func TestRefusesParam(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		param  string
		want   bool
	}{
		// OpenAI, o1 / gpt-5 (teilomillet/gollm#33, griptape-ai/ComfyUI-Griptape#312).
		{"openai max_tokens", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`, "max_tokens", true},
		{"openai max_tokens is not about temperature", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`, "temperature", false},
		{"openai max_tokens does not refuse max_completion_tokens", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`, "max_completion_tokens", false},
		// OpenAI, gpt-5 / o3 (gabrii/Cursor-Azure-GPT-5#33, BeehiveInnovations/pal-mcp-server#78).
		{"openai temperature value", 400, `{"error":{"message":"Unsupported value: 'temperature' does not support 0.3 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`, "temperature", true},
		// OpenAI, o3-mini (BerriAI/litellm#8192); gpt-5.2 with code null (OpenHands/software-agent-sdk#1837).
		{"openai temperature parameter", 400, `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}`, "temperature", true},
		{"openai temperature code null", 400, `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":null}}`, "temperature", true},
		// Azure OpenAI adds a callstack (jekalmin/extended_openai_conversation#298).
		{"azure with callstack", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter","callstack":"  File \"/usr/local/bin/gunicorn\", line 8"}}`, "max_tokens", true},
		// A gateway that keeps only the message (caozhiyuan/copilot-api#164).
		{"gateway without param", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","code":"invalid_request_body"}}`, "max_tokens", true},
		{"gateway suggestion is not a refusal", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","code":"invalid_request_body"}}`, "max_completion_tokens", false},
		// LiteLLM proxy (BerriAI/litellm#13381, jentic/standard-agent#31, BerriAI/litellm#5884).
		{"litellm wrapped openai", 400, `{"error":{"message":"litellm.BadRequestError: OpenAIException - Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":null,"param":null,"code":"400"}}`, "max_tokens", true},
		{"litellm UnsupportedParamsError", 400, `{"error":{"message":"litellm.UnsupportedParamsError: gpt-5 models don't support temperature=0.2. Only temperature=1 is supported. To drop unsupported params set ` + "`litellm.drop_params = True`" + `","type":null,"param":null,"code":"400"}}`, "temperature", true},
		{"litellm does not support parameters", 400, `{"error":{"message":"openai does not support parameters: {'temperature': 1}, for model=o1-mini. To drop these, set litellm.drop_params=True","type":null,"param":null,"code":"400"}}`, "temperature", true},
		// Anthropic, Opus 4.7 (BerriAI/litellm#26444).
		{"anthropic deprecated temperature", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"` + "`temperature`" + ` is deprecated for this model."}}`, "temperature", true},
		// Azure, an unknown parameter (promptfoo/promptfoo#3781); OpenAI's own wording for one.
		{"azure unknown parameter", 400, `{"error":{"message":"Unknown parameter: 'reasoning_effort'.","type":"invalid_request_error","param":"reasoning_effort","code":"unknown_parameter"}}`, "reasoning_effort", true},
		{"openai unrecognized argument", 400, `{"error":{"message":"Unrecognized request argument supplied: max_completion_tokens","type":"invalid_request_error","param":null,"code":null}}`, "max_completion_tokens", true},
		// A pydantic server that forbids extra fields.
		{"pydantic extra_forbidden", 422, `{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":4000}]}`, "max_completion_tokens", true},
		{"plain text", 400, `Unsupported parameter: max_tokens`, "max_tokens", true},

		// Not refusals.
		{"max_tokens too large", 400, `{"error":{"message":"max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you provided 100000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`, "max_tokens", false},
		{"vllm max_tokens too large", 400, `{"object":"error","message":"'max_tokens' or 'max_completion_tokens' is too large: 10000. This model's maximum context length is 16384 tokens and your request has 8000 input tokens (10000 > 16384 - 8000).","type":"BadRequestError","param":null,"code":400}`, "max_tokens", false},
		{"vllm max_tokens negative", 400, `{"object":"error","message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","param":null,"code":400}`, "max_tokens", false},
		{"anthropic overflow names max_tokens", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 199759 + 8192 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`, "max_tokens", false},
		{"another parameter refused", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens_per_chunk' is not supported with this model.","param":"max_tokens_per_chunk","code":"unsupported_parameter"}}`, "max_tokens", false},
		{"not a 400", 500, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model.","param":"max_tokens","code":"unsupported_parameter"}}`, "max_tokens", false},
		{"a 200", 200, `{"choices":[{"message":{"content":"Unsupported parameter: 'max_tokens' is not supported"}}]}`, "max_tokens", false},
	} {
		if got := RefusesParam(tc.status, []byte(tc.body), tc.param); got != tc.want {
			t.Errorf("%s: RefusesParam(%d, …, %q) = %v, want %v", tc.name, tc.status, tc.param, got, tc.want)
		}
	}
}

func TestRetryRules(t *testing.T) {
	maxTokens := `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`
	temperature := `{"error":{"message":"Unsupported value: 'temperature' does not support 0.3 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`
	unknownMCT := `{"error":{"message":"Unrecognized request argument supplied: max_completion_tokens","type":"invalid_request_error","param":null,"code":null}}`
	for _, tc := range []struct {
		name  string
		sent  ParamRules
		body  string
		want  ParamRules
		retry bool
	}{
		{"a refused max_tokens means a reasoning model: both change in one retry", ParamRules{}, maxTokens, ReasoningRules, true},
		{"a refused temperature drops only temperature", ParamRules{}, temperature, ParamRules{NoTemperature: true}, true},
		{"then a refused max_tokens switches the cap", ParamRules{NoTemperature: true}, maxTokens, ReasoningRules, true},
		{"a server that does not know max_completion_tokens gets max_tokens", ReasoningRules, unknownMCT, ParamRules{NoTemperature: true}, true},
		{"a refusal of what was not sent changes nothing", ReasoningRules, maxTokens, ReasoningRules, false},
		{"temperature already left out", ParamRules{NoTemperature: true}, temperature, ParamRules{NoTemperature: true}, false},
		{"another error is no refusal", ParamRules{}, `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`, ParamRules{}, false},
	} {
		got, retry := RetryRules(tc.sent, 400, []byte(tc.body))
		if got != tc.want || retry != tc.retry {
			t.Errorf("%s: RetryRules = %+v, %v; want %+v, %v", tc.name, got, retry, tc.want, tc.retry)
		}
	}
}
