package replay

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// A Claude Code transcript (~/.claude/projects/<project>/<session>.jsonl)
// is one event a line: user and assistant messages (an assistant answer
// split over several lines, one content block each, sharing message.id),
// each linked to the one before it by parentUuid; attachments, summaries,
// system events and bookkeeping around them. Sub-agents (the Task/Agent
// tool) run conversations of their own: older versions write them in the
// same file (isSidechain), newer ones in <session>/subagents/agent-*.jsonl.
//
// Since 2.1 it also records each request it sent (api-request: the
// parameters, the messages as a base request's first `keep` plus a `tail`
// named by digest, the cache_control paths; api-request-shape: the system
// and tools; api-request-blob: the messages found nowhere else), from
// which the requests are rebuilt as sent (fromRecords).
// Without them, each request is the chain of messages that led to an
// answer, with Claude Code's system prompt and tools (claudeCodeProfile).

// claudeTranscript is a Claude Code transcript as the readers need it.
type claudeTranscript struct {
	sessionID string
	entries   []claudeEntry  // the lines with a uuid, in file order
	byUUID    map[string]int // entries by uuid
	// The request records (fromRecords).
	shapes  map[string]gjson.Result   // api-request-shape by shapeHash
	blobs   map[[32]byte]gjson.Result // api-request-blob messages by digest
	records []gjson.Result            // api-request lines, in order
	// An answer's lines and the results of its calls may branch off the
	// chain (parallel calls): these find them from any line of it.
	answerBlocks map[string][]string // every block of an answer, by message.id
	results      map[string]string   // the first tool_result for a tool_use id
	// bad counts the lines that are not JSON objects.
	bad int
}

// claudeEntry is a transcript line with a uuid.
type claudeEntry struct {
	typ, uuid, parent string
	sidechain         bool
	line              gjson.Result
}

func readClaudeTranscript(data []byte) claudeTranscript {
	lines, bad := jsonLines(data)
	t := claudeTranscript{byUUID: map[string]int{}, shapes: map[string]gjson.Result{},
		blobs: map[[32]byte]gjson.Result{}, answerBlocks: map[string][]string{}, results: map[string]string{}, bad: bad}
	for _, l := range lines {
		if t.sessionID == "" {
			t.sessionID = l.Get("sessionId").String()
		}
		switch typ := l.Get("type").String(); typ {
		case "api-request-shape":
			t.shapes[l.Get("shapeHash").String()] = l.Get("shape")
		case "api-request-blob":
			if d, ok := digestOf(l.Get("hash").String()); ok {
				t.blobs[d] = l.Get("message")
			}
		case "api-request":
			t.records = append(t.records, l)
		default:
			uuid := l.Get("uuid").String()
			if uuid == "" {
				continue
			}
			if _, dup := t.byUUID[uuid]; dup {
				continue // a line written twice is read once
			}
			t.byUUID[uuid] = len(t.entries)
			t.entries = append(t.entries, claudeEntry{typ: typ, uuid: uuid,
				parent: l.Get("parentUuid").String(), sidechain: l.Get("isSidechain").Bool(), line: l})
			t.index(typ, l.Get("message"))
		}
	}
	return t
}

// index notes an answer's blocks and a user message's tool results.
func (t claudeTranscript) index(typ string, msg gjson.Result) {
	switch typ {
	case "assistant":
		if id := msg.Get("id").String(); id != "" {
			t.answerBlocks[id] = append(t.answerBlocks[id], contentBlocks(msg.Get("content"))...)
		}
	case "user":
		msg.Get("content").ForEach(func(_, b gjson.Result) bool {
			if id := b.Get("tool_use_id").String(); b.Get("type").String() == "tool_result" && t.results[id] == "" {
				t.results[id] = b.Raw
			}
			return true
		})
	}
}

// claudeCodeConversations reads a Claude Code transcript: the
// conversation its request records rebuild when it has them, else one per
// chain of messages (the main one, and a sidechain's each).
func claudeCodeConversations(data []byte) ([]conversation, error) {
	t := readClaudeTranscript(data)
	skipped := ""
	if t.bad > 0 {
		skipped = fmt.Sprintf("; %d lines that are not JSON skipped", t.bad)
	}
	why := ""
	if len(t.records) > 0 {
		reqs, err := t.fromRecords()
		if err == nil {
			return []conversation{{requests: reqs, model: mostCommonModel(reqs),
				approximated: strings.TrimPrefix(skipped, "; ")}}, nil
		}
		why = fmt.Sprintf("its request records do not rebuild it (%v), so ", err)
	}
	convs := t.fromChains()
	for i := range convs {
		convs[i].approximated = why + "system prompt, tools and cache_control placement are Claude Code " +
			claudeCodeProfile.version + "'s (the transcript does not record them)" + skipped
	}
	return convs, nil
}

// modelCall is one model call of a transcript without request records: the
// assistant lines of one message.id.
type modelCall struct {
	first     int // the entry of its first line
	model     string
	sidechain bool
}

// modelCalls are the model calls in t, in order, leaving out Claude Code's
// synthetic answers (an API error shown as a message), which no model
// gave.
func (t claudeTranscript) modelCalls() []modelCall {
	var out []modelCall
	seen := map[string]bool{}
	for i, e := range t.entries {
		if e.typ != "assistant" {
			continue
		}
		msg := e.line.Get("message")
		id := msg.Get("id").String()
		if id == "" {
			id = e.uuid
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if m := msg.Get("model").String(); m != "<synthetic>" {
			out = append(out, modelCall{first: i, model: m, sidechain: e.sidechain})
		}
	}
	return out
}

// fromChains rebuilds each answer's request from the chain of entries
// before it: the main conversation's answers make one conversation, each
// sidechain (by the entry it starts from) one more.
func (t claudeTranscript) fromChains() []conversation {
	var convs []conversation
	index := map[string]int{} // conversation by key
	for _, a := range t.modelCalls() {
		chain := t.chain(t.entries[a.first].parent, a.sidechain)
		msgs := t.messages(chain)
		if len(msgs) == 0 {
			continue // nothing of what the model read is in the transcript
		}
		key := "main"
		if a.sidechain {
			key = t.entries[a.first].uuid
			if len(chain) > 0 {
				key = t.entries[chain[0]].uuid
			}
		}
		i, ok := index[key]
		if !ok {
			i = len(convs)
			index[key] = i
			convs = append(convs, conversation{})
		}
		convs[i].requests = append(convs[i].requests, claudeChainBody(a.model, msgs, t.sessionID))
	}
	_, hasMain := index["main"]
	for key, i := range index {
		convs[i].model = mostCommonModel(convs[i].requests)
		// A sub-agent's own file is one sidechain: it needs no suffix.
		if key != "main" && (hasMain || len(convs) > 1) {
			convs[i].suffix = "#sidechain-" + key[:min(8, len(key))]
		}
	}
	return convs
}

// chain is the entries from the root to uuid, following parentUuid; a
// sidechain's stops where the main conversation's entries begin.
func (t claudeTranscript) chain(uuid string, sidechain bool) []int {
	var rev []int
	seen := map[string]bool{}
	for uuid != "" && !seen[uuid] {
		seen[uuid] = true
		i, ok := t.byUUID[uuid]
		if !ok || t.entries[i].sidechain != sidechain {
			break
		}
		rev = append(rev, i)
		uuid = t.entries[i].parent
	}
	out := make([]int, len(rev))
	for k, i := range rev {
		out[len(rev)-1-k] = i
	}
	return out
}

// messages are the API messages the entries of chain make, as Claude Code
// sends them: every line of an answer joined (parallel calls branch off
// the chain), attachments' rendered text as the user's, entries shown but
// never sent left out, then normalised (normaliseMessages) with the
// results of the answers' calls wherever they are.
func (t claudeTranscript) messages(chain []int) []claudeMessage {
	var out []claudeMessage
	answered := map[string]bool{} // answers already in out, by message.id
	for _, i := range chain {
		e := t.entries[i]
		msg := e.line.Get("message")
		switch e.typ {
		case "user":
			if e.line.Get("isVisibleInTranscriptOnly").Bool() {
				continue
			}
			out = append(out, claudeMessage{role: "user", blocks: contentBlocks(msg.Get("content"))})
		case "assistant":
			id := msg.Get("id").String()
			if msg.Get("model").String() == "<synthetic>" || answered[id] {
				continue
			}
			blocks := contentBlocks(msg.Get("content"))
			if id != "" {
				answered[id], blocks = true, t.answerBlocks[id]
			}
			out = append(out, claudeMessage{role: "assistant", blocks: blocks})
		case "attachment":
			var blocks []string
			e.line.Get("rendered").ForEach(func(_, r gjson.Result) bool {
				if c := r.Get("content"); c.Type == gjson.String && c.Str != "" {
					blocks = append(blocks, textBlock(c.Str))
				}
				return true
			})
			if len(blocks) > 0 {
				out = append(out, claudeMessage{role: "user", blocks: blocks})
			}
		}
	}
	return normaliseMessages(out, t.results)
}

// claudeMessage is an API message: a role and its content blocks, raw.
type claudeMessage struct {
	role   string
	blocks []string
}

func (m claudeMessage) raw() string {
	return rawMessage(m.role, "["+strings.Join(m.blocks, ",")+"]")
}

// contentBlocks are a message content's blocks, raw; a string is one text
// block (the API reads it so).
func contentBlocks(c gjson.Result) []string {
	if c.Type == gjson.String {
		if c.Str == "" {
			return nil
		}
		return []string{textBlock(c.Str)}
	}
	var out []string
	c.ForEach(func(_, b gjson.Result) bool {
		if b.IsObject() {
			out = append(out, b.Raw)
		}
		return true
	})
	return out
}

func textBlock(s string) string {
	b, _ := sjson.Set(`{"type":"text"}`, "text", s)
	return b
}
