package replay

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// fromRecords rebuilds the requests Claude Code sent from its request
// records: each names a base request whose first `keep` messages it
// repeats, then the messages of its `tail` by digest (found among the
// transcript's messages and the blobs written for the others), the shape
// that holds its system and tools, its parameters and where its
// cache_control markers go. It fails when any of that is missing.
func (t claudeTranscript) fromRecords() ([][]byte, error) {
	known := t.messageDigests()
	byID := map[string][]string{} // the messages of each request rebuilt so far
	var out [][]byte
	for n, r := range t.records {
		keep := int(r.Get("keep").Int())
		base := byID[r.Get("base").String()]
		if keep > len(base) {
			return nil, fmt.Errorf("request %d keeps %d messages of a request with %d", n+1, keep, len(base))
		}
		msgs := append([]string(nil), base[:keep]...)
		var missing error
		r.Get("tail").ForEach(func(_, h gjson.Result) bool {
			d, ok := digestOf(h.String())
			m, found := known[d]
			if !ok || !found {
				missing = fmt.Errorf("request %d names a message the transcript does not hold", n+1)
				return false
			}
			msgs = append(msgs, m)
			return true
		})
		if missing != nil {
			return nil, missing
		}
		byID[r.Get("id").String()] = msgs
		shape, ok := t.shapes[r.Get("shapeHash").String()]
		if !ok {
			return nil, fmt.Errorf("request %d names a shape the transcript does not hold", n+1)
		}
		body, err := claudeRecordBody(r, shape, msgs, t.sessionID)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", n+1, err)
		}
		out = append(out, body)
	}
	if len(out) == 0 {
		return nil, errors.New("no requests")
	}
	return out, nil
}

// messageDigests are the messages the records may name, by digest: the
// blobs, each user line's message (a string also as the one text block it
// is), and each answer's lines joined into one assistant message.
func (t claudeTranscript) messageDigests() map[[32]byte]string {
	known := map[[32]byte]string{}
	add := func(raw string) {
		if d, err := canonicalDigest(raw); err == nil {
			known[d] = raw
		}
	}
	for d, m := range t.blobs {
		known[d] = m.Raw
	}
	var answer []string // the blocks of the answer being read
	answerID := ""
	flush := func() {
		if len(answer) > 0 {
			add(rawMessage("assistant", "["+strings.Join(answer, ",")+"]"))
		}
		answer, answerID = nil, ""
	}
	for _, e := range t.entries {
		msg := e.line.Get("message")
		switch e.typ {
		case "user":
			c := msg.Get("content")
			add(rawMessage("user", c.Raw))
			if c.Type == gjson.String { // sent as one text block when a marker goes on it
				add(rawMessage("user", "["+textBlock(c.Str)+"]"))
			}
		case "assistant":
			if id := msg.Get("id").String(); id != answerID {
				flush()
				answerID = id
			}
			msg.Get("content").ForEach(func(_, b gjson.Result) bool {
				answer = append(answer, b.Raw)
				return true
			})
		}
	}
	flush()
	return known
}

// digestOf reads a hex SHA-256.
func digestOf(s string) ([32]byte, bool) {
	var d [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(d) {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

// claudeRecordBody is the body a request record describes: its
// parameters (but betas, a header), the shape's system and tools, msgs,
// the markers at their paths, and a role:"system" message of one unmarked
// text block sent as a string, as Claude Code sends it.
func claudeRecordBody(r, shape gjson.Result, msgs []string, session string) ([]byte, error) {
	body := []byte(`{}`)
	var err error
	set := func(path, raw string) {
		if err == nil && raw != "" {
			body, err = sjson.SetRawBytes(body, path, []byte(raw))
		}
	}
	set("model", r.Get("params.model").Raw)
	set("messages", "["+strings.Join(msgs, ",")+"]")
	set("system", shape.Get("system").Raw)
	set("tools", shape.Get("tools").Raw)
	set("metadata", claudeMetadata(session))
	r.Get("params").ForEach(func(k, v gjson.Result) bool {
		if k.Str != "model" && k.Str != "betas" && plainPathPart(k.Str) {
			set(k.Str, v.Raw)
		}
		return true
	})
	set("stream", "true")
	r.Get("cacheControl").ForEach(func(_, c gjson.Result) bool {
		var path []string
		plain := true
		c.Get("path").ForEach(func(_, p gjson.Result) bool {
			path = append(path, p.String())
			plain = plain && plainPathPart(p.String())
			return plain
		})
		// Only on a block the request has: a path is the record's word.
		if plain && gjson.GetBytes(body, strings.Join(path, ".")).IsObject() {
			set(strings.Join(append(path, "cache_control"), "."), c.Get("value").Raw)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return systemMessagesAsStrings(body)
}

// plainPathPart reports whether s is a JSON key or array index a gjson or
// sjson path can hold as it is: letters, digits and underscores only (a
// path's `.`, `*`, `#` or `@` would mean more, and an index far past an
// array's end would make sjson fill it).
func plainPathPart(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	digits := true
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			digits = false
		default:
			return false
		}
	}
	return !digits || len(s) <= 6
}

// systemMessagesAsStrings sends a role:"system" message whose content is
// one text block without a marker as a string.
func systemMessagesAsStrings(body []byte) ([]byte, error) {
	var err error
	gjson.GetBytes(body, "messages").ForEach(func(i, m gjson.Result) bool {
		c := m.Get("content")
		if m.Get("role").String() != "system" || len(c.Array()) != 1 {
			return true
		}
		b := c.Array()[0]
		if b.Get("type").String() == "text" && !b.Get("cache_control").Exists() {
			body, err = sjson.SetBytes(body, fmt.Sprintf("messages.%d.content", i.Int()), b.Get("text").String())
		}
		return err == nil
	})
	return body, err
}

// claudeMetadata is the metadata Claude Code sends: user_id, a JSON string
// naming the session (its device and account are not in the transcript).
func claudeMetadata(session string) string {
	id, _ := sjson.Set(`{"device_id":"","account_uuid":""}`, "session_id", session)
	m, _ := sjson.Set(`{}`, "user_id", id)
	return m
}

// claudeChainBody is the request of an answer whose messages a transcript
// without request records gives: Claude Code's system prompt, tools and
// parameters (claudeCodeProfile) around them, its markers where it puts
// them (the system blocks and the last message's last block).
func claudeChainBody(model string, msgs []claudeMessage, session string) []byte {
	raws := make([]string, len(msgs))
	for i, m := range msgs {
		raws[i] = m.raw()
	}
	body := []byte(`{}`)
	set := func(path, raw string) {
		body, _ = sjson.SetRawBytes(body, path, []byte(raw))
	}
	m, _ := sjson.Set(`{}`, "m", model)
	set("model", gjson.Get(m, "m").Raw)
	set("messages", "["+strings.Join(raws, ",")+"]")
	set("system", claudeCodeProfile.system)
	set("tools", claudeCodeProfile.tools)
	set("metadata", claudeMetadata(session))
	claudeCodeProfile.params.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "model" {
			set(k.Str, v.Raw)
		}
		return true
	})
	set("stream", "true")
	marker := `{"type":"ephemeral"}`
	for i := range 2 {
		if gjson.GetBytes(body, fmt.Sprintf("system.%d", i)).IsObject() {
			set(fmt.Sprintf("system.%d.cache_control", i), marker)
		}
	}
	if n := len(msgs); n > 0 && len(msgs[n-1].blocks) > 0 {
		set(fmt.Sprintf("messages.%d.content.%d.cache_control", n-1, len(msgs[n-1].blocks)-1), marker)
	}
	return body
}

// normaliseMessages makes msgs a conversation the API takes, as Claude
// Code does before it sends one: empty messages dropped, consecutive
// messages of a role joined, the first a user's; every tool_use answered
// in the next message, its tool_result blocks first (one the message does
// not hold from results, by tool_use id, else as Claude Code words a
// missing one), a tool_result that answers no call left out.
func normaliseMessages(msgs []claudeMessage, results map[string]string) []claudeMessage {
	out := joinRoles(msgs)
	for i := 0; i < len(out); i++ {
		if out[i].role != "user" {
			continue
		}
		var calls []string
		if i > 0 && out[i-1].role == "assistant" {
			calls = toolUseIDs(out[i-1])
		}
		out[i].blocks = answerCalls(out[i].blocks, calls, results)
	}
	if n := len(out); n > 0 && out[n-1].role == "assistant" && len(toolUseIDs(out[n-1])) > 0 {
		out = append(out, claudeMessage{role: "user", blocks: answerCalls(nil, toolUseIDs(out[n-1]), results)})
	}
	return joinRoles(out) // a user message left empty goes, and its neighbours join
}

// joinRoles drops empty messages and the ones before the first user
// message, and joins consecutive messages of one role.
func joinRoles(msgs []claudeMessage) []claudeMessage {
	var out []claudeMessage
	for _, m := range msgs {
		switch {
		case len(m.blocks) == 0, len(out) == 0 && m.role != "user":
		case len(out) > 0 && out[len(out)-1].role == m.role:
			last := &out[len(out)-1]
			last.blocks = append(append([]string(nil), last.blocks...), m.blocks...)
		default:
			out = append(out, claudeMessage{role: m.role, blocks: append([]string(nil), m.blocks...)})
		}
	}
	return out
}

// toolUseIDs are the ids of m's tool_use blocks.
func toolUseIDs(m claudeMessage) []string {
	var ids []string
	for _, b := range m.blocks {
		if gjson.Get(b, "type").String() == "tool_use" {
			ids = append(ids, gjson.Get(b, "id").String())
		}
	}
	return ids
}

// answerCalls is a user message's blocks with a tool_result for each of
// calls first, in their order (the message's own, else elsewhere's, else
// Claude Code's stand-in), then its other blocks; tool_result blocks for
// other calls go.
func answerCalls(blocks []string, calls []string, elsewhere map[string]string) []string {
	own := map[string]string{}
	var rest []string
	for _, b := range blocks {
		if gjson.Get(b, "type").String() != "tool_result" {
			rest = append(rest, b)
			continue
		}
		if id := gjson.Get(b, "tool_use_id").String(); own[id] == "" {
			own[id] = b
		}
	}
	var out []string
	for _, id := range calls {
		r := own[id]
		if r == "" {
			r = elsewhere[id]
		}
		if r == "" {
			r, _ = sjson.Set(`{"type":"tool_result","content":"[Tool result missing due to internal error]","is_error":true}`, "tool_use_id", id)
		}
		out = append(out, r)
	}
	return append(out, rest...)
}
