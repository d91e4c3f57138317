package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// Kind is what a session file holds, told from its content.
type Kind string

// The kinds of session files.
const (
	// KindBodies: request bodies (a .jsonl file: one a line, in the order
	// they were sent; any other file: one body holding a whole run, as the
	// corpus traces do).
	KindBodies Kind = "requests"
	// KindClaudeCode: a Claude Code transcript (~/.claude/projects/**/*.jsonl).
	KindClaudeCode Kind = "claude-code"
	// KindCodex: a codex session rollout ($CODEX_HOME/sessions/**/rollout-*.jsonl).
	KindCodex Kind = "codex"
	// KindUnknown: none of these.
	KindUnknown Kind = ""
)

// codexLineTypes are the `type`s of a codex rollout line.
var codexLineTypes = map[string]bool{"session_meta": true, "response_item": true, "turn_context": true,
	"event_msg": true, "compacted": true, "world_state": true, "token_usage_record": true}

// detectKind tells what data holds from its first lines: a codex rollout
// line is a `type` codex writes with a `payload`; a Claude Code line names
// its `sessionId` or links to a parent (`parentUuid`), or is a `summary`
// of a leaf; a request body has `messages` or `input`, and so does a file
// that is one JSON object over several lines.
func detectKind(data []byte) Kind {
	if whole := bytes.TrimSpace(data); len(whole) > 0 && whole[0] == '{' && jsonvalid.Valid(whole) {
		if isBody(gjson.ParseBytes(whole)) {
			return KindBodies
		}
	}
	lines, _ := jsonLines(data)
	for i, line := range lines {
		if i == 20 { // a session says what it is on its first lines
			break
		}
		typ := line.Get("type").String()
		switch {
		case line.Get("payload").Exists() && codexLineTypes[typ]:
			return KindCodex
		case line.Get("sessionId").Type == gjson.String, line.Get("parentUuid").Exists(),
			typ == "summary" && line.Get("leafUuid").Exists():
			return KindClaudeCode
		case isBody(line):
			return KindBodies
		}
	}
	return KindUnknown
}

// isBody reports whether v looks like a request body: it has `messages`
// or `input`.
func isBody(v gjson.Result) bool {
	return v.Get("messages").IsArray() || v.Get("input").Exists()
}

// jsonLines returns the lines of a JSONL file that are JSON objects, and
// how many of its other non-blank lines are not (a last line cut short by
// a crash, typically).
func jsonLines(data []byte) (lines []gjson.Result, bad int) {
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !jsonvalid.Valid(line) || line[0] != '{' {
			bad++
			continue
		}
		lines = append(lines, gjson.ParseBytes(line))
	}
	return lines, bad
}

// conversation is one agent conversation read from a transcript: the
// requests its agent sent, one per model call, in order.
type conversation struct {
	// suffix tells it from the file's other conversations ("" for the main one).
	suffix   string
	requests [][]byte
	// model is the model of most of its requests.
	model string
	// approximated says what the transcript did not record and the reader
	// filled in ("" when nothing was).
	approximated string
}

// mostCommonModel is the model most of bodies name (the first of a tie).
func mostCommonModel(bodies [][]byte) string {
	counts := map[string]int{}
	best := ""
	for _, b := range bodies {
		m := gjson.GetBytes(b, "model").String()
		counts[m]++
		if counts[m] > counts[best] || best == "" {
			best = m
		}
	}
	return best
}

// canonicalDigest is the SHA-256 of v's JSON with object keys sorted and
// no spaces, as Claude Code hashes the messages its request records name.
func canonicalDigest(raw string) ([32]byte, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return [32]byte{}, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // JavaScript's JSON.stringify leaves <, > and & as they are
	if err := enc.Encode(v); err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte{'\n'})), nil
}

// rawMessage is {"role":role,"content":content}, content raw JSON.
func rawMessage(role, content string) string {
	r, _ := json.Marshal(role)
	return fmt.Sprintf(`{"role":%s,"content":%s}`, r, content)
}
