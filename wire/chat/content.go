package chat

import (
	"crypto/sha256"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Overhead returns the tokens of message m apart from its content: the
// framing, role, name, tool_call_id and the assistant's tool calls
// (function name and arguments text). Other fields a client adds are not
// sent to the model by providers and are not counted. A message that is
// not an object counts as its raw text.
func (Format) Overhead(c *wire.Conversation, i int, count wire.Count) int {
	m := parseMessage(c.Body, c.Messages[i].Start, nil)
	if !m.object {
		return tokensPerMessage + count(string(m.bytes()))
	}
	n := tokensPerMessage + count(m.role)
	if m.name != "" {
		n += count(m.name) + tokensPerName
	}
	n += count(m.toolCallID)
	result(c.Body, m.toolCalls).ForEach(func(_, tc gjson.Result) bool {
		fn := tc.Get("function")
		n += count(fn.Get("name").String()) + argsTokens(count, fn.Get("arguments"))
		return true
	})
	if fc := result(c.Body, m.functionCall); fc.IsObject() {
		n += count(fc.Get("name").String()) + argsTokens(count, fc.Get("arguments"))
	}
	return n
}

// argsTokens counts tool-call arguments: the string as sent, or the raw JSON
// of an object a sloppy client sent instead.
func argsTokens(count wire.Count, args gjson.Result) int {
	if args.Type == gjson.String {
		return count(args.Str)
	}
	return count(args.Raw)
}

// Parts returns the parts of item it's content: a string content is one
// text part; an array content one part per element, text parts (text,
// input_text, output_text with a string text) as text; a null or absent
// content none; any other value one part counted as its raw JSON.
func (Format) Parts(c *wire.Conversation, it int, count wire.Count) []wire.Part {
	content := result(c.Body, c.Items[it].Content)
	textPart := func(t gjson.Result) wire.Part {
		p := wire.Part{IsText: true, Text: t.Str}
		if rawAt(c.Body, t) {
			p.Span = wire.Span{Start: t.Index, End: t.Index + len(t.Raw)}
		}
		return p
	}
	switch {
	case content.Type == gjson.String:
		return []wire.Part{textPart(content)}
	case content.IsArray():
		var parts []wire.Part
		content.ForEach(func(_, part gjson.Result) bool {
			if t, ok := squashablePart(part); ok {
				parts = append(parts, textPart(t))
			} else if count != nil {
				parts = append(parts, wire.Part{Tokens: partTokens(count, part)})
			} else {
				parts = append(parts, wire.Part{})
			}
			return true
		})
		return parts
	case !content.Exists(), content.Type == gjson.Null:
		return nil
	}
	p := wire.Part{}
	if count != nil {
		p.Tokens = count(content.Raw)
	}
	return []wire.Part{p}
}

// partTokens counts one content part that is not a text part. Refusal
// parts count their text; an image counts imagePartTokens; audio and file
// parts count 0 (their base64 data says nothing about the model's cost and
// is not text); any other part counts its raw JSON.
func partTokens(count wire.Count, part gjson.Result) int {
	if part.Type == gjson.String {
		return count(part.Str)
	}
	switch part.Get("type").String() {
	case "text", "input_text", "output_text":
		return count(part.Get("text").String())
	case "refusal":
		return count(part.Get("refusal").String())
	case "image_url", "input_image", "image":
		return imagePartTokens
	case "input_audio", "file", "input_file", "audio":
		return 0
	}
	return count(part.Raw)
}

// rawAt reports whether v's Index really points at its raw text in body, so
// that an edit at that offset replaces exactly v. gjson leaves Index 0 when
// it cannot tell; such a value is never edited.
func rawAt(body []byte, v gjson.Result) bool {
	i := v.Index
	return i > 0 && i+len(v.Raw) <= len(body) && string(body[i:i+len(v.Raw)]) == v.Raw
}

// squashablePart returns the text value of a text part of an array content.
func squashablePart(part gjson.Result) (gjson.Result, bool) {
	if !part.IsObject() {
		return gjson.Result{}, false
	}
	switch part.Get("type").String() {
	case "text", "input_text", "output_text":
		if t := part.Get("text"); t.Type == gjson.String {
			return t, true
		}
	}
	return gjson.Result{}, false
}

// Text returns the text of item it's content: the string, or its text
// parts joined by newlines. Images and other parts contribute nothing.
func (Format) Text(c *wire.Conversation, it int) string {
	return contentText(result(c.Body, c.Items[it].Content))
}

// contentText returns the text of a content: the string, or its text parts
// joined by newlines.
func contentText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	var b []byte
	content.ForEach(func(_, part gjson.Result) bool {
		if t, ok := squashablePart(part); ok {
			if len(b) > 0 {
				b = append(b, '\n')
			}
			b = append(b, t.Str...)
		}
		return true
	})
	return string(b)
}

// Arguments returns a call's arguments as the model wrote them: the JSON
// string's value, or the raw JSON of an object a sloppy client sent.
func (Format) Arguments(c *wire.Conversation, it int) string {
	args := result(c.Body, c.Items[it].Args)
	if args.Type == gjson.String {
		return args.Str
	}
	return args.Raw
}

// CanonicalArguments returns the canonical form of a call's arguments: a
// JSON string holding JSON (the normal form) and the same JSON sent as an
// object (sloppy clients) both give wire.AppendCanonical of that JSON. A
// string that is not JSON is kept as is, after a NUL so it cannot equal a
// JSON form; absent arguments give nil.
func (Format) CanonicalArguments(c *wire.Conversation, it int) []byte {
	return canonicalArgs(result(c.Body, c.Items[it].Args))
}

func canonicalArgs(args gjson.Result) []byte {
	switch {
	case args.Type == gjson.String:
		if jsonvalid.Valid([]byte(args.Str)) {
			return wire.AppendCanonical(nil, gjson.Parse(args.Str))
		}
		return append([]byte{0}, args.Str...)
	case !args.Exists():
		return nil
	default:
		return wire.AppendCanonical(nil, args)
	}
}

// Digest is the sha256 of message m's canonical form. cache_control
// markers are left out: Anthropic-style clients move their prompt-cache
// breakpoints to the newest messages every turn, which must not make the
// history look edited.
func (Format) Digest(c *wire.Conversation, m int) [sha256.Size]byte {
	return sha256.Sum256(wire.AppendCanonicalSkip(nil, gjson.Parse(string(c.Bytes(m))), "cache_control"))
}
