package messagestest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
)

// Prompt is a request as the model reads it, in the order prompt caching
// hashes it: each tool, each system block, each message's blocks. A
// segment is canonical: cache_control removed (a marker does not change
// what is cached), a string content is the one text block it stands for,
// keys sorted. So two requests that differ only in marker placement or in
// a string turned into a text block (Claude Code does both every turn)
// have the same prefix, as they do for the real cache and for the binding
// of thinking signatures. The messages are read from the latest compaction
// block on: the API drops every block before it.
type Prompt struct {
	Segments [][]byte
	Marked   []bool // a cache_control marker ends at this segment
	// Lead is how many segments the tools and system are.
	Lead int
	// MessageStart[i] is the index of message i's first segment read;
	// MessageStart[len(messages)] is len(Segments).
	MessageStart []int
	nested       int        // markers inside tool_result contents, and on blocks not read
	chain        [][32]byte // chain[k] identifies the first k segments
}

func buildPrompt(tools []json.RawMessage, system []block, msgs []message) Prompt {
	var p Prompt
	add := func(kind string, fields any, marked bool) {
		var b bytes.Buffer
		b.WriteString(kind)
		b.WriteByte(0)
		b.Write(canonical(fields))
		p.Segments = append(p.Segments, b.Bytes())
		p.Marked = append(p.Marked, marked)
	}
	for _, t := range tools {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(t, &m)
		_, marked := m["cache_control"]
		add("tool", m, marked)
	}
	for _, b := range system {
		add("system", b.Fields, b.Marked)
	}
	p.Lead = len(p.Segments)
	fromM, fromK, _ := readFrom(msgs)
	for i, m := range msgs {
		p.MessageStart = append(p.MessageStart, len(p.Segments))
		for k, b := range m.Blocks {
			if i < fromM || i == fromM && k < fromK {
				if b.Marked { // not read, but counted against the limit
					p.nested++
				}
				p.nested += b.Nested
				continue
			}
			add(m.Role, b.Fields, b.Marked || b.Nested > 0)
			p.nested += max(b.Nested-1, 0)
		}
	}
	p.MessageStart = append(p.MessageStart, len(p.Segments))
	p.chain = make([][32]byte, len(p.Segments)+1)
	for i, s := range p.Segments {
		h := sha256.New()
		h.Write(p.chain[i][:])
		h.Write(s)
		copy(p.chain[i+1][:], h.Sum(nil))
	}
	return p
}

// head is the prompt of the first n segments.
func (p Prompt) head(n int) Prompt {
	return Prompt{Segments: p.Segments[:n:n], Marked: p.Marked[:n:n], Lead: min(p.Lead, n), chain: p.chain[: n+1 : n+1]}
}

// markers counts the cache_control markers.
func (p Prompt) markers() int {
	n := p.nested
	for _, m := range p.Marked {
		if m {
			n++
		}
	}
	return n
}

// Bytes is the size of the first n segments.
func (p Prompt) Bytes(n int) int {
	total := 0
	for _, s := range p.Segments[:n] {
		total += len(s)
	}
	return total
}

// Hash identifies the first n segments (a hash chain, so every prefix's
// hash costs nothing more).
func (p Prompt) Hash(n int) [32]byte { return p.chain[n] }

// LastMarker is the number of segments up to and including the last one
// that carries a cache_control marker, 0 when none does.
func (p Prompt) LastMarker() int {
	for i := len(p.Marked) - 1; i >= 0; i-- {
		if p.Marked[i] {
			return i + 1
		}
	}
	return 0
}

// canonical re-encodes a block without its cache_control markers (nested
// tool_result content included), a string tool_result content as the one
// text block it stands for.
func canonical(fields any) []byte {
	raw, _ := json.Marshal(fields)
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	_ = d.Decode(&v)
	delete(v, "cache_control")
	if v["type"] == "tool_result" {
		switch c := v["content"].(type) {
		case string:
			v["content"] = []any{map[string]any{"type": "text", "text": c}}
		case []any:
			for _, part := range c {
				if pm, ok := part.(map[string]any); ok {
					delete(pm, "cache_control")
				}
			}
		}
	}
	out, _ := json.Marshal(v)
	return out
}
