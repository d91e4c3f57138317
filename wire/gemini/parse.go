package gemini

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// Span is a [Start, End) range of bytes in a request body.
type Span = wire.Span

// PartKind is what a part of a content is, by the member that holds its
// data (a part holds one of them).
type PartKind uint8

// The kinds of parts ctxpress tells apart; every other part (a future
// kind, one with none of these) is PartOther, opaque.
const (
	PartOther PartKind = iota
	PartText
	PartInlineData
	PartFileData
	PartFunctionCall
	PartFunctionResponse
	PartExecutableCode
	PartCodeExecutionResult
)

// Part is one element of a content's parts.
type Part struct {
	Span Span
	Kind PartKind
	// Text is a text part's text (a JSON string).
	Text Span
	// Thought marks a part of the model's thoughts (thought: true).
	Thought bool
	// Signature is the thoughtSignature's value; zero when absent.
	Signature Span
	// Name and ID are a functionCall's or functionResponse's name and id
	// ("" when absent).
	Name, ID string
	// Args is a functionCall's args; Response a functionResponse's
	// response; zero when absent.
	Args, Response Span
}

// Content is one element of contents.
type Content struct {
	Span  Span
	Role  string // user, model; "" when absent (the API reads it as user)
	Parts Span   // the parts array; zero when absent or not an array
	List  []Part
}

// Request is a generateContent body as ctxpress reads it.
type Request struct {
	Body []byte
	// Model is a "model" member of the body, which the REST API does not
	// need (the path names the model); "" when absent.
	Model string
	// SystemInstruction, Tools, ToolConfig, GenerationConfig are the
	// top-level members of those names (camelCase or snake_case, as the
	// API takes both); zero when absent.
	SystemInstruction, Tools, ToolConfig, GenerationConfig Span
	// ContentsArray is the contents value; Contents are its elements.
	ContentsArray Span
	Contents      []Content
	top           top
}

// canon is a member name in the API's camelCase: proto JSON takes the
// snake_case spelling too, and Google's own REST examples use it.
func canon(name string) string {
	switch name {
	case "system_instruction":
		return "systemInstruction"
	case "tool_config":
		return "toolConfig"
	case "generation_config":
		return "generationConfig"
	case "inline_data":
		return "inlineData"
	case "file_data":
		return "fileData"
	case "function_call":
		return "functionCall"
	case "function_response":
		return "functionResponse"
	case "executable_code":
		return "executableCode"
	case "code_execution_result":
		return "codeExecutionResult"
	case "thought_signature":
		return "thoughtSignature"
	case "function_declarations":
		return "functionDeclarations"
	case "usage_metadata":
		return "usageMetadata"
	case "thinking_config":
		return "thinkingConfig"
	case "max_output_tokens":
		return "maxOutputTokens"
	}
	return name
}

// Parse reads a generateContent body; false when it is not valid JSON or
// not an object.
func Parse(body []byte) (*Request, bool) {
	if !jsonvalid.Valid(body) {
		return nil, false
	}
	return parseValid(body)
}

// parseValid is Parse of a body known to be valid JSON. It scans without
// decoding (wire's scanner): only roles, names and ids are decoded. A
// member sent twice counts as its last value.
func parseValid(body []byte) (*Request, bool) {
	i := wire.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	req := &Request{Body: body}
	wire.WalkObject(body, i, req.member)
	return req, true
}

// top is what the top-level walk has read when contents opens: where
// Format.Resume continues from.
type top struct {
	model                                 string
	system, tools, toolConfig, generation Span
	array                                 int // where the contents array opens
}

// member reads one top-level member of req's body (WalkObject's fn).
func (req *Request) member(k Span, vs int) int {
	body := req.Body
	name := canon(wire.KeyName(body, k))
	if name == "contents" && body[vs] == '[' {
		req.top = top{model: req.Model, system: req.SystemInstruction, tools: req.Tools,
			toolConfig: req.ToolConfig, generation: req.GenerationConfig, array: vs}
		req.Contents = nil
		ve := wire.WalkArray(body, vs, req.content)
		req.ContentsArray = Span{Start: vs, End: ve}
		return ve
	}
	ve := wire.ValueEnd(body, vs)
	v := Span{Start: vs, End: ve}
	switch name {
	case "model":
		req.Model, _ = wire.StringValue(body, v)
	case "systemInstruction":
		req.SystemInstruction = v
	case "tools":
		req.Tools = v
	case "toolConfig":
		req.ToolConfig = v
	case "generationConfig":
		req.GenerationConfig = v
	case "contents":
		req.ContentsArray, req.Contents = v, nil
	}
	return ve
}

// content reads one element of req's contents (WalkArray's fn).
func (req *Request) content(cs int) int {
	c := readContent(req.Body, cs)
	req.Contents = append(req.Contents, c)
	return c.Span.End
}

// readContent reads the element of contents that starts at body[i].
func readContent(body []byte, i int) Content {
	c := Content{Span: Span{Start: i}}
	if body[i] != '{' {
		c.Span.End = wire.ValueEnd(body, i)
		return c
	}
	c.Span.End = wire.WalkObject(body, i, func(k Span, vs int) int {
		switch wire.KeyName(body, k) {
		case "role":
			ve := wire.ValueEnd(body, vs)
			c.Role, _ = wire.StringValue(body, Span{Start: vs, End: ve})
			return ve
		case "parts":
			c.List, c.Parts = nil, Span{}
			if body[vs] != '[' {
				return wire.ValueEnd(body, vs)
			}
			ve := wire.WalkArray(body, vs, func(ps int) int {
				p := readPart(body, ps)
				c.List = append(c.List, p)
				return p.Span.End
			})
			c.Parts = Span{Start: vs, End: ve}
			return ve
		}
		return wire.ValueEnd(body, vs)
	})
	return c
}

// readPart reads the part that starts at body[i].
func readPart(body []byte, i int) Part {
	p := Part{Span: Span{Start: i}}
	if body[i] != '{' {
		p.Span.End = wire.ValueEnd(body, i)
		return p
	}
	p.Span.End = wire.WalkObject(body, i, func(k Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		v := Span{Start: vs, End: ve}
		switch canon(wire.KeyName(body, k)) {
		case "text":
			if body[vs] == '"' {
				p.Kind, p.Text = PartText, v
			}
		case "thought":
			p.Thought = string(v.Of(body)) == "true"
		case "thoughtSignature":
			p.Signature = v
		case "inlineData":
			p.Kind = PartInlineData
		case "fileData":
			p.Kind = PartFileData
		case "executableCode":
			p.Kind = PartExecutableCode
		case "codeExecutionResult":
			p.Kind = PartCodeExecutionResult
		case "functionCall":
			p.Kind = PartFunctionCall
			p.Name, p.ID, p.Args = readCall(body, v, "args")
		case "functionResponse":
			p.Kind = PartFunctionResponse
			p.Name, p.ID, p.Response = readCall(body, v, "response")
		}
		return ve
	})
	return p
}

// readCall reads a functionCall or functionResponse object: its name, id
// and the value of its member data (args, response).
func readCall(body []byte, v Span, data string) (name, id string, d Span) {
	if body[v.Start] != '{' {
		return "", "", Span{}
	}
	wire.WalkObject(body, v.Start, func(k Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		s := Span{Start: vs, End: ve}
		switch wire.KeyName(body, k) {
		case "name":
			name, _ = wire.StringValue(body, s)
		case "id":
			id, _ = wire.StringValue(body, s)
		case data:
			d = s
		}
		return ve
	})
	return name, id, d
}
