package replay

import (
	"crypto/sha256"
	"errors"
	"sync"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// element is one piece of a prompt as a prefix cache compares it: the
// model, a tool, the instructions, a system block, a message (Responses:
// an input item, with the reasoning before it).
type element struct {
	key    [sha256.Size]byte // of its canonical form: equal keys, equal elements
	tokens int
}

// prompt is a request as the provider reads it.
type prompt struct {
	elements []element
	tokens   int // every prompt token: the elements' and the reply priming
	// marked is how many tokens the prompt holds up to the end of its last
	// element with a cache_control marker (Messages), the part Anthropic
	// writes to its cache.
	marked int
	conv   *wire.Conversation
	format wire.Format
}

// Tokens counts prompts' tokens with ctxpress's own counter (o200k), each
// message's count memoised by its bytes: a replay sends every message of a
// run again on each later turn. It is safe for concurrent use.
type Tokens struct {
	counter *rewrite.Counter

	mu        sync.Mutex
	memo      map[[sha256.Size]byte]element // by the message's bytes as sent; guarded by mu
	summaries map[int]string                // summaryText by length; guarded by mu
}

// NewTokens returns an empty Tokens.
func NewTokens() *Tokens {
	return &Tokens{counter: rewrite.NewCounter(0), memo: map[[sha256.Size]byte]element{}, summaries: map[int]string{}}
}

// Count is text's o200k tokens.
func (t *Tokens) Count(text string) int { return t.counter.Count(rewrite.O200K, text) }

func wireFormat(f Format) wire.Format {
	switch f {
	case Responses:
		return responses.Format{}
	case Messages:
		return messages.Format{}
	}
	return chat.Format{}
}

var errNotRequest = errors.New("not a request of this format")

// prompt reads body (valid JSON) as f reads it, into the elements a cache
// compares: the model, each tool (and legacy function), the instructions
// (Responses `instructions`, a string input; Messages: each system block,
// cache_control left out), then each message as its format's canonical
// digest has it (cache_control left out). Tokens are ctxpress's: each
// message as CountRequest counts it, the others as their raw JSON.
func (t *Tokens) prompt(f Format, body []byte) (prompt, error) {
	wf := wireFormat(f)
	conv, ok := wf.Parse(body)
	if !ok {
		return prompt{}, errNotRequest
	}
	p := prompt{conv: conv, format: wf, tokens: conv.Priming}
	elementTokens := 0
	mark := func(marked bool) {
		if marked && f == Messages {
			p.marked = elementTokens
		}
	}
	add := func(kind string, canonical []byte, tokens int) {
		h := sha256.New()
		h.Write([]byte(kind))
		h.Write([]byte{0})
		h.Write(canonical)
		var e element
		h.Sum(e.key[:0])
		e.tokens = tokens
		p.elements = append(p.elements, e)
		p.tokens += tokens
		elementTokens += tokens
	}
	add("model", []byte(conv.Model), 0)
	top := gjson.ParseBytes(body)
	for _, k := range []string{"tools", "functions"} {
		top.Get(k).ForEach(func(_, tool gjson.Result) bool {
			add(k, wire.AppendCanonicalSkip(nil, tool, "cache_control"), t.Count(tool.Raw))
			mark(tool.Get("cache_control").Exists())
			return true
		})
	}
	switch f {
	case Responses:
		for _, k := range []string{"instructions", "input"} {
			if v := top.Get(k); v.Type == gjson.String {
				add(k, []byte(v.Str), t.Count(v.Raw))
			}
		}
	case Messages:
		switch sys := top.Get("system"); {
		case sys.Type == gjson.String:
			add("system", []byte(sys.Str), t.Count(sys.Raw))
		case sys.IsArray():
			sys.ForEach(func(_, b gjson.Result) bool {
				add("system", wire.AppendCanonicalSkip(nil, b, "cache_control"), t.Count(b.Raw))
				mark(b.Get("cache_control").Exists())
				return true
			})
		}
	}
	for i := range conv.Messages {
		e := t.message(wf, conv, i)
		p.elements = append(p.elements, e)
		p.tokens += e.tokens
		elementTokens += e.tokens
		mark(hasMarker(conv.Messages[i].Span.Of(conv.Body)))
	}
	return p, nil
}

// hasMarker reports whether a Messages message carries a cache_control
// marker on one of its blocks.
func hasMarker(msg []byte) bool {
	marked := false
	gjson.GetBytes(msg, "content").ForEach(func(_, b gjson.Result) bool {
		marked = b.Get("cache_control").Exists()
		return !marked
	})
	return marked
}

// message is message i's element, memoised by its bytes.
func (t *Tokens) message(wf wire.Format, conv *wire.Conversation, i int) element {
	raw := conv.Messages[i].Span.Of(conv.Body)
	h := sha256.New()
	h.Write([]byte(wf.Name()))
	h.Write([]byte{0})
	h.Write(raw)
	var id [sha256.Size]byte
	h.Sum(id[:0])
	t.mu.Lock()
	e, ok := t.memo[id]
	t.mu.Unlock()
	if ok {
		return e
	}
	e = element{key: wf.Digest(conv, i), tokens: messageTokens(wf, conv, i, t.Count)}
	t.mu.Lock()
	t.memo[id] = e
	t.mu.Unlock()
	return e
}

// messageTokens is message i's tokens as rewrite.Counter.CountRequest
// counts them: the format's overhead and each item's content parts.
func messageTokens(wf wire.Format, conv *wire.Conversation, i int, count wire.Count) int {
	n := wf.Overhead(conv, i, count)
	m := conv.Messages[i]
	if !m.Object {
		return n
	}
	for it := m.Items.Start; it < m.Items.End; it++ {
		if !conv.Items[it].Content.Exists() {
			continue
		}
		for _, part := range wf.Parts(conv, it, count) {
			if part.IsText {
				n += count(part.Text)
			} else {
				n += part.Tokens
			}
		}
	}
	return n
}
