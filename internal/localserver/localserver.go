// Package localserver tells a local model server (llama.cpp's
// llama-server, LM Studio, Ollama, vLLM) from anything else answering on
// an upstream's address, by what it answers a few probes with: a gateway
// on localhost or an SSH tunnel to a provider is hosted, however near its
// address.
package localserver

import (
	"github.com/tidwall/gjson"
)

// Class is what an upstream is: a local model server (whose slots share
// one KV cache, priced by prefill) or not, what kind, and why.
type Class struct {
	Local bool
	Kind  string // "llama.cpp", "LM Studio", "Ollama", "vLLM", "hosted", "unreachable", …
	Why   string
}

// Answer is one probe's answer: its status (0: no answer), its Server
// header and body.
type Answer struct {
	Status int
	Server string
	Body   []byte
}

// The probes: each local model server answers one of these as nothing
// else does.
const (
	Llama  = "llama"  // GET /props: llama-server's settings
	LMS    = "lms"    // GET /api/v0/models: LM Studio's models with their load state
	Ollama = "ollama" // GET /api/version: Ollama's version
	Models = "models" // GET {base}/models: vLLM's list says owned_by vllm
)

// Paths are the probes' paths on an upstream whose base path is base.
func Paths(base string) map[string]string {
	return map[string]string{Llama: "/props", LMS: "/api/v0/models", Ollama: "/api/version", Models: base + "/models"}
}

// Classify says what an upstream is from its probes' answers; loopback
// says whether its address is this machine, which decides only when
// nothing answered.
func Classify(answers map[string]Answer, loopback bool) Class {
	ok := func(name string) (gjson.Result, bool) {
		a := answers[name]
		if a.Status != 200 || !gjson.ValidBytes(a.Body) {
			return gjson.Result{}, false
		}
		return gjson.ParseBytes(a.Body), true
	}
	if p, found := ok(Llama); found && (p.Get("default_generation_settings").Exists() || p.Get("total_slots").Exists()) {
		return Class{Local: true, Kind: "llama.cpp", Why: "it answers GET /props as llama-server does"}
	}
	for _, a := range answers {
		// llama-server names itself on every answer, a refusal of a
		// request without its --api-key too.
		if a.Server == "llama.cpp" {
			return Class{Local: true, Kind: "llama.cpp", Why: "it answers as Server: llama.cpp"}
		}
	}
	if p, found := ok(LMS); found && (p.Get("data.0.state").Exists() || p.Get("data.0.compatibility_type").Exists()) {
		return Class{Local: true, Kind: "LM Studio", Why: "it answers GET /api/v0/models as LM Studio does"}
	}
	if p, found := ok(Ollama); found && p.IsObject() && p.Get("version").Type == gjson.String && len(p.Map()) == 1 {
		return Class{Local: true, Kind: "Ollama", Why: "it answers GET /api/version as Ollama does"}
	}
	if p, found := ok(Models); found && p.Get(`data.#(owned_by=="vllm")`).Exists() {
		return Class{Local: true, Kind: "vLLM", Why: "its model list is vLLM's"}
	}
	for _, a := range answers {
		if a.Status != 0 {
			return Class{Kind: "hosted", Why: "it answers, but as no local model server does (a provider or a gateway)"}
		}
	}
	if loopback {
		return Class{Local: true, Kind: "unreachable", Why: "it did not answer at startup; its address is this machine"}
	}
	return Class{Kind: "unreachable", Why: "it did not answer at startup; its address is another machine"}
}
