package gemini

import (
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
)

var _ wire.Tools = Format{}

// OfferTool adds t to body's tools as a function declaration {name,
// description, parametersJsonSchema} (its parameters are JSON Schema,
// which the older parameters field, an OpenAPI subset, may refuse): last
// in the functionDeclarations of the last tool that has them, or, when
// none has, as a tool of its own after the others (Google's own tools:
// googleSearch, codeExecution). false, body unchanged, when body offers
// no tools or declares a function named t.Name already.
func (Format) OfferTool(body []byte, t wire.Tool) ([]byte, bool) {
	def := wire.AppendJSONString([]byte(`{"name":`), t.Name)
	def = wire.AppendJSONString(append(def, `,"description":`...), t.Description)
	def = append(append(append(def, `,"parametersJsonSchema":`...), t.Parameters...), '}')
	tools, ok := wire.TopArray(body, "tools", member)
	if !ok {
		return body, false
	}
	n, taken := 0, false
	var decls Span // the functionDeclarations of the last tool that has them
	wire.WalkArray(body, tools.Start, func(vs int) int {
		ve := wire.ValueEnd(body, vs)
		n++
		if body[vs] != '{' {
			return ve
		}
		fd := member(body, vs, "functionDeclarations")
		if !fd.Exists() || body[fd.Start] != '[' {
			return ve
		}
		decls = fd
		wire.WalkArray(body, fd.Start, func(ds int) int {
			de := wire.ValueEnd(body, ds)
			if body[ds] == '{' && gjson.GetBytes(body[ds:de], "name").String() == t.Name {
				taken = true
			}
			return de
		})
		return ve
	})
	if n == 0 || taken {
		return body, false
	}
	if decls.Exists() {
		at := decls.End - 1
		if wire.SkipSpace(body, decls.Start+1) < at {
			def = append([]byte{','}, def...)
		}
		return wire.Splice(body, []wire.Edit{{Start: at, End: at, Repl: def}}), true
	}
	tool := append(append([]byte(`{"functionDeclarations":[`), def...), "]}"...)
	at := tools.End - 1
	return wire.Splice(body, []wire.Edit{{Start: at, End: at, Repl: append([]byte{','}, tool...)}}), true
}

// ReadAnswer reads a GenerateContentResponse, or a stream of them (SSE,
// or a JSON array), for candidates[0]'s parts: each part as it came,
// chunk after chunk, never merged (a part with a signature must come back
// as it was). A stream is whole once a chunk gave a finishReason.
func (Format) ReadAnswer(answer []byte) (wire.Answer, bool) {
	a := &toolAnswer{}
	i := wire.SkipSpace(answer, 0)
	switch {
	case i < len(answer) && answer[i] == '{':
		if !jsonvalid.Valid(answer) {
			return nil, false
		}
		root := gjson.ParseBytes(answer)
		if !root.Get("candidates.0.content").Exists() {
			return nil, false
		}
		a.chunk(root)
		return a.read(), true
	case i < len(answer) && answer[i] == '[':
		if !jsonvalid.Valid(answer) {
			return nil, false
		}
		gjson.ParseBytes(answer).ForEach(func(_, ch gjson.Result) bool {
			a.chunk(ch)
			return true
		})
	default:
		var events sse.JSONEvents
		each := func(data []byte) { a.chunk(gjson.ParseBytes(data)) }
		events.Feed(answer, []byte(`"`), each)
		events.Feed([]byte("\n"), []byte(`"`), each)
	}
	if a.errored || a.finish == "" {
		return nil, false
	}
	return a.read(), true
}

// toolAnswer is an answer as ReadAnswer reads it: candidates[0]'s parts.
type toolAnswer struct {
	parts   [][]byte
	calls   []wire.Call
	usage   Usage
	finish  string
	errored bool
}

// chunk adds one GenerateContentResponse's parts, usage and finishReason.
func (a *toolAnswer) chunk(ch gjson.Result) {
	if ch.Get("error").Exists() {
		a.errored = true
		return
	}
	if u := ReadUsage(usageOf(ch)); u.Found {
		a.usage = u
	}
	cand := ch.Get("candidates.0")
	if f := field(cand, "finishReason", "finish_reason").String(); f != "" {
		a.finish = f
	}
	cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		a.parts = append(a.parts, []byte(p.Raw))
		return true
	})
}

// read finds the functionCall parts' calls.
func (a *toolAnswer) read() *toolAnswer {
	for _, p := range a.parts {
		if c, ok := callOf(p); ok {
			a.calls = append(a.calls, c)
		}
	}
	return a
}

// callOf is the call of a functionCall part (its id "" when it has none).
func callOf(part []byte) (wire.Call, bool) {
	fc := field(gjson.ParseBytes(part), "functionCall", "function_call")
	if !fc.IsObject() {
		return wire.Call{}, false
	}
	args := fc.Get("args").Raw
	if args == "" {
		args = "{}"
	}
	return wire.Call{ID: fc.Get("id").String(), Name: fc.Get("name").String(), Arguments: args}, true
}

func (a *toolAnswer) Calls() []wire.Call { return a.calls }

func (a *toolAnswer) Usage() Usage { return a.usage }

// Continue appends the model's content (every part as it came, thoughts
// and signatures with their parts, but the functionCall parts not kept)
// and a user content of one functionResponse per result, {name, id when
// the call had one, response: {"output": text}} ({"error": text} for a
// failure, as Gemini CLI answers). When a call left out carried the step's
// signature and no kept call carries one, the first kept call gets
// DummySignature: Google requires one on a step's first call, and the
// model's own cannot move to another part. The request must end with the
// user's content.
func (a *toolAnswer) Continue(body []byte, keep func(wire.Call) bool, results []wire.CallResult) ([]byte, error) {
	req, ok := parseValid(body)
	if !ok || len(req.Contents) == 0 {
		return nil, wire.ErrNoTurn
	}
	if r := req.Contents[len(req.Contents)-1].Role; r != "user" && r != "" {
		return nil, wire.ErrNoTurn
	}
	var kept [][]byte
	lostSignature, firstKept, signedKept := false, -1, false
	for _, p := range a.parts {
		c, isCall := callOf(p)
		signed := gjson.GetBytes(p, "thoughtSignature").Exists() || gjson.GetBytes(p, "thought_signature").Exists()
		if isCall && !keep(c) {
			lostSignature = lostSignature || signed
			continue
		}
		if isCall {
			if firstKept < 0 {
				firstKept = len(kept)
			}
			signedKept = signedKept || signed
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return nil, wire.ErrNoTurn // a model content needs a part
	}
	if lostSignature && !signedKept && firstKept >= 0 {
		p := kept[firstKept]
		end := len(p) - 1 // the part's closing brace
		kv := wire.AppendJSONString([]byte(`,"thoughtSignature":`), DummySignature)
		kept[firstKept] = append(append(append([]byte(nil), p[:end]...), kv...), p[end:]...)
	}
	m := []byte(`{"role":"model","parts":[`)
	for i, p := range kept {
		if i > 0 {
			m = append(m, ',')
		}
		m = append(m, p...)
	}
	m = append(m, `]}`...)
	u := []byte(`{"role":"user","parts":[`)
	for i, r := range results {
		if i > 0 {
			u = append(u, ',')
		}
		u = wire.AppendJSONString(append(u, `{"functionResponse":{"name":`...), r.Call.Name)
		if r.Call.ID != "" {
			u = wire.AppendJSONString(append(u, `,"id":`...), r.Call.ID)
		}
		key := `,"response":{"output":`
		if r.IsError {
			key = `,"response":{"error":`
		}
		u = append(wire.AppendJSONString(append(u, key...), r.Text), "}}}"...)
	}
	u = append(u, `]}`...)
	out, ok := wire.AppendToList(body, "contents", m, u)
	if !ok {
		return nil, wire.ErrNoTurn
	}
	return out, nil
}
