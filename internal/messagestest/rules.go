package messagestest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The messages' rules. Error wording is the API's where it was seen in
// reports (github.com/anthropics/claude-code issues #3512, #13460, #10627,
// #63404, #54013; Wei-Shaw/sub2api #176, #225); the placement rules of
// role:"system" messages follow Anthropic's "Mid-conversation system
// messages" page, in our own words.

// message is one entry of messages.
type message struct {
	Role   string
	Blocks []block
	String bool // content was a string (one text block)
}

// block is one content block.
type block struct {
	Type      string
	Path      string // messages.N.content.M
	Fields    map[string]json.RawMessage
	Text      string // text, thinking, compaction content
	Signature string // thinking signature, redacted_thinking data, compaction encrypted_content
	// Compacts: a compaction block with content, where the model starts
	// reading (content null is a failed compaction, a no-op).
	Compacts  bool
	ID        string // tool_use id
	ToolUseID string // tool_result
	Marked    bool   // carries cache_control
	Nested    int    // cache_control markers inside a tool_result's content
}

var (
	toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	toolIDPattern   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// Block types per role. Server tools' results are assistant blocks too.
var blockTypes = map[string]map[string]bool{
	"user":      {"text": true, "image": true, "document": true, "tool_result": true, "search_result": true, "container_upload": true},
	"assistant": {"text": true, "thinking": true, "redacted_thinking": true, "tool_use": true, "server_tool_use": true, "mcp_tool_use": true, "mcp_tool_result": true, "compaction": true},
	"system":    {"text": true},
}

// toolResultTypes are the blocks a tool_result's content may hold.
var toolResultTypes = map[string]bool{"text": true, "image": true, "document": true, "search_result": true}

func readTools(raw json.RawMessage, r *Request) ([]json.RawMessage, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return nil, invalid("tools: Input should be a valid list")
	}
	seen := map[string]bool{}
	for i, t := range tools {
		var tl struct {
			Name        string          `json:"name"`
			Type        string          `json:"type"`
			InputSchema map[string]any  `json:"input_schema"`
			Cache       json.RawMessage `json:"cache_control"`
		}
		if json.Unmarshal(t, &tl) != nil {
			return nil, invalid("tools.%d: Input should be an object", i)
		}
		if !toolNamePattern.MatchString(tl.Name) {
			return nil, invalid("tools.%d.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", i)
		}
		if tl.Type == "" && tl.InputSchema == nil {
			return nil, invalid("tools.%d.custom.input_schema: Field required", i)
		}
		if seen[tl.Name] {
			return nil, invalid("tools: Tool names must be unique.")
		}
		seen[tl.Name] = true
		if err := checkCacheControl(fmt.Sprintf("tools.%d", i), tl.Cache); err != nil {
			return nil, err
		}
		r.Tools = append(r.Tools, Tool{Name: tl.Name, Schema: tl.InputSchema})
	}
	return tools, nil
}

// readSystem reads the top-level system: a string or text blocks.
func readSystem(raw json.RawMessage) ([]block, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []block{{Type: "text", Path: "system", Text: s, Fields: textFields(s)}}, nil
	}
	var raws []json.RawMessage
	if json.Unmarshal(raw, &raws) != nil {
		return nil, invalid("system: Input should be a valid string or list")
	}
	var out []block
	for i, b := range raws {
		bl, err := readBlock(fmt.Sprintf("system.%d", i), b, map[string]bool{"text": true})
		if err != nil {
			return nil, err
		}
		out = append(out, bl)
	}
	return out, nil
}

func textFields(s string) map[string]json.RawMessage {
	b, _ := json.Marshal(s)
	return map[string]json.RawMessage{"type": json.RawMessage(`"text"`), "text": b}
}

// readMessages reads and checks every message, then the pairing of tool
// calls and results and the placement of system messages.
func readMessages(raws []json.RawMessage, o Options) ([]message, *Error) {
	msgs := make([]message, len(raws))
	for i, raw := range raws {
		m, err := readMessage(i, raw, o)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	for i := range msgs {
		if err := placement(msgs, i); err != nil {
			return nil, err
		}
		if err := pairing(msgs, i); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

func readMessage(i int, raw json.RawMessage, o Options) (message, *Error) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return message{}, invalid("messages.%d: Input should be an object", i)
	}
	if blockTypes[m.Role] == nil {
		return message{}, invalid("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
	}
	if m.Role == "system" && o.NoSystemMessages {
		return message{}, invalid("messages.%d.role: role 'system' is not supported on this model", i)
	}
	msg := message{Role: m.Role}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		if s == "" {
			return msg, emptyContent(i)
		}
		msg.String = true
		msg.Blocks = []block{{Type: "text", Path: fmt.Sprintf("messages.%d.content", i), Text: s, Fields: textFields(s)}}
		return msg, nil
	}
	var raws []json.RawMessage
	if json.Unmarshal(m.Content, &raws) != nil {
		return msg, invalid("messages.%d.content: Input should be a valid string or list", i)
	}
	if len(raws) == 0 {
		return msg, emptyContent(i)
	}
	for j, b := range raws {
		bl, err := readBlock(fmt.Sprintf("messages.%d.content.%d", i, j), b, blockTypes[m.Role])
		if err != nil {
			return msg, err
		}
		msg.Blocks = append(msg.Blocks, bl)
	}
	return msg, nil
}

func emptyContent(i int) *Error {
	return invalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
}

// readBlock reads one content block and checks its fields.
func readBlock(path string, raw json.RawMessage, allowed map[string]bool) (block, *Error) {
	b := block{Path: path}
	if json.Unmarshal(raw, &b.Fields) != nil {
		return b, invalid("%s: Input should be an object", path)
	}
	_ = json.Unmarshal(b.Fields["type"], &b.Type)
	if !allowed[b.Type] && !(allowed["tool_use"] && strings.HasSuffix(b.Type, "_tool_result")) {
		return b, invalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags", path, b.Type)
	}
	cache, marked := b.Fields["cache_control"]
	b.Marked = marked && string(cache) != "null"
	if err := checkCacheControl(path, cache); err != nil {
		return b, err
	}
	switch b.Type {
	case "text":
		if json.Unmarshal(b.Fields["text"], &b.Text) != nil {
			return b, invalid("%s.text: Field required", path)
		}
		if b.Text == "" && b.Marked {
			return b, invalid("%s.text: cache_control cannot be set for empty text blocks", path)
		}
		if b.Text == "" {
			return b, invalid("messages: text content blocks must be non-empty")
		}
	case "thinking", "redacted_thinking":
		return b, readThinkingBlock(&b)
	case "tool_use":
		if json.Unmarshal(b.Fields["id"], &b.ID) != nil || !toolIDPattern.MatchString(b.ID) {
			return b, invalid("%s.id: String should match pattern '^[a-zA-Z0-9_-]+$'", path)
		}
		var name string
		if json.Unmarshal(b.Fields["name"], &name) != nil || name == "" {
			return b, invalid("%s.name: Field required", path)
		}
		var input map[string]any
		if json.Unmarshal(b.Fields["input"], &input) != nil || input == nil {
			return b, invalid("%s.input: Input should be a valid dictionary", path)
		}
	case "tool_result":
		return b, readToolResult(&b)
	case "compaction":
		return b, readCompaction(&b)
	}
	return b, nil
}

// readCompaction reads a compaction block: content a non-empty string or
// null (a failed compaction), encrypted_content a string or null.
func readCompaction(b *block) *Error {
	if raw, ok := b.Fields["content"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &b.Text) != nil {
			return invalid("%s.compaction.content: Input should be a valid string", b.Path)
		}
		if b.Text == "" {
			// The SDKs: "Empty string content is not allowed."
			return invalid("%s.compaction.content: String should have at least 1 character", b.Path)
		}
		b.Compacts = true
	}
	if raw, ok := b.Fields["encrypted_content"]; ok && string(raw) != "null" && json.Unmarshal(raw, &b.Signature) != nil {
		return invalid("%s.compaction.encrypted_content: Input should be a valid string", b.Path)
	}
	return nil
}

// readFrom is where the model starts reading msgs: the latest compaction
// block with content (message m, block k), the API dropping every block
// before it; ok false when there is none and the model reads them all.
func readFrom(msgs []message) (m, k int, ok bool) {
	for m = len(msgs) - 1; m >= 0; m-- {
		for k = len(msgs[m].Blocks) - 1; k >= 0; k-- {
			if msgs[m].Blocks[k].Compacts {
				return m, k, true
			}
		}
	}
	return 0, 0, false
}

func readThinkingBlock(b *block) *Error {
	if b.Marked {
		return invalid("%s.%s.cache_control: Extra inputs are not permitted", b.Path, b.Type)
	}
	if b.Type == "redacted_thinking" {
		if json.Unmarshal(b.Fields["data"], &b.Signature) != nil {
			return invalid("%s.redacted_thinking.data: Field required", b.Path)
		}
		return nil
	}
	if json.Unmarshal(b.Fields["thinking"], &b.Text) != nil {
		return invalid("%s.thinking.thinking: Field required", b.Path)
	}
	if json.Unmarshal(b.Fields["signature"], &b.Signature) != nil {
		return invalid("%s.thinking.signature: Field required", b.Path)
	}
	return nil
}

func readToolResult(b *block) *Error {
	if json.Unmarshal(b.Fields["tool_use_id"], &b.ToolUseID) != nil || b.ToolUseID == "" {
		return invalid("%s.tool_use_id: Field required", b.Path)
	}
	if raw, ok := b.Fields["is_error"]; ok {
		var isErr bool
		if json.Unmarshal(raw, &isErr) != nil {
			return invalid("%s.is_error: Input should be a valid boolean", b.Path)
		}
	}
	raw, ok := b.Fields["content"]
	if !ok {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return invalid("%s.content: Input should be a valid string or list", b.Path)
	}
	for k, p := range parts {
		inner, err := readBlock(fmt.Sprintf("%s.content.%d", b.Path, k), p, toolResultTypes)
		if err != nil {
			return err
		}
		if inner.Marked {
			b.Nested++
		}
	}
	return nil
}

// checkCacheControl checks a cache_control value, when there is one.
func checkCacheControl(path string, raw json.RawMessage) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var cc struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	if json.Unmarshal(raw, &cc) != nil || cc.Type != "ephemeral" {
		return invalid("%s.cache_control.type: Input should be 'ephemeral'", path)
	}
	if cc.TTL != "" && cc.TTL != "5m" && cc.TTL != "1h" {
		return invalid("%s.cache_control.ttl: Input should be '5m' or '1h'", path)
	}
	return nil
}

// placement checks a role:"system" message's place: after a user message,
// not twice in a row, followed by an assistant message or last.
func placement(msgs []message, i int) *Error {
	if msgs[i].Role != "system" {
		return nil
	}
	switch {
	case i == 0:
		return invalid("messages.0: a system message cannot be the first message; use the top-level `system` parameter")
	case i+1 < len(msgs) && msgs[i+1].Role == "system":
		return invalid("messages.%d: consecutive system messages are not allowed", i+1)
	case msgs[i-1].Role != "user":
		return invalid("messages.%d: a system message must follow a user message", i)
	case i+1 < len(msgs) && msgs[i+1].Role != "assistant":
		return invalid("messages.%d: a system message must be followed by an assistant message or be the last message", i)
	}
	return nil
}

// pairing checks that an assistant message's tool_use blocks are all
// answered in the very next message, and that a user message's tool_result
// blocks answer calls of the message right before it.
func pairing(msgs []message, i int) *Error {
	m := msgs[i]
	switch m.Role {
	case "assistant":
		var calls []string
		for _, b := range m.Blocks {
			if b.Type == "tool_use" {
				calls = append(calls, b.ID)
			}
		}
		if len(calls) == 0 {
			return nil
		}
		answered := map[string]bool{}
		if i+1 < len(msgs) && msgs[i+1].Role == "user" {
			for _, b := range msgs[i+1].Blocks {
				answered[b.ToolUseID] = b.Type == "tool_result"
			}
		}
		var missing []string
		for _, id := range calls {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
	case "user":
		called := map[string]bool{}
		if i > 0 && msgs[i-1].Role == "assistant" {
			for _, b := range msgs[i-1].Blocks {
				called[b.ID] = b.Type == "tool_use"
			}
		}
		for _, b := range m.Blocks {
			if b.Type == "tool_result" && !called[b.ToolUseID] {
				return invalid("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", b.Path, b.ToolUseID)
			}
		}
	}
	return nil
}

// lastUserText is the text of the last user message that has any (tool
// results and their outputs left out).
func lastUserText(msgs []message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var texts []string
		for _, b := range msgs[i].Blocks {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	return ""
}
