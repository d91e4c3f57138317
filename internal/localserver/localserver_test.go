package localserver

import "testing"

func TestClassifyAnswers(t *testing.T) {
	ok := func(body string) Answer { return Answer{Status: 200, Body: []byte(body)} }
	notFound := Answer{Status: 404, Body: []byte(`{"error":"not found"}`)}
	for _, tc := range []struct {
		name     string
		answers  map[string]Answer
		loopback bool
		local    bool
		kind     string
	}{
		{"llama-server's /props", map[string]Answer{Llama: ok(`{"default_generation_settings":{},"total_slots":1}`)}, true, true, "llama.cpp"},
		{"llama-server behind --api-key names itself", map[string]Answer{Llama: {Status: 401, Server: "llama.cpp", Body: []byte(`{"error":{}}`)}}, false, true, "llama.cpp"},
		{"LM Studio's REST API", map[string]Answer{LMS: ok(`{"object":"list","data":[{"id":"qwen","type":"llm","state":"loaded","compatibility_type":"gguf"}]}`)}, false, true, "LM Studio"},
		{"Ollama's version", map[string]Answer{Ollama: ok(`{"version":"0.12.3"}`), Llama: notFound}, false, true, "Ollama"},
		{"vLLM's model list", map[string]Answer{Models: ok(`{"object":"list","data":[{"id":"m","owned_by":"vllm","max_model_len":32768}]}`)}, true, true, "vLLM"},
		{"a gateway on loopback answers as none of them", map[string]Answer{Llama: notFound, LMS: notFound, Ollama: notFound,
			Models: ok(`{"object":"list","data":[{"id":"gpt-5","owned_by":"openai"}]}`)}, true, false, "hosted"},
		{"a version object with more in it is not Ollama's", map[string]Answer{Ollama: ok(`{"version":"1.2","build":"x"}`)}, true, false, "hosted"},
		{"nothing answers on loopback", map[string]Answer{Llama: {}, LMS: {}}, true, true, "unreachable"},
		{"nothing answers elsewhere", map[string]Answer{Llama: {}}, false, false, "unreachable"},
	} {
		got := Classify(tc.answers, tc.loopback)
		if got.Local != tc.local || got.Kind != tc.kind || got.Why == "" {
			t.Errorf("%s: %+v, want local=%v kind=%s and a reason", tc.name, got, tc.local, tc.kind)
		}
	}
}
