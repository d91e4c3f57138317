package messagestest

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
)

// Ledger is what an upstream remembers of the thinking it produced, to
// verify it when a client sends it back: each block's text and the prompt
// it was produced after (a real signature binds both), and which blocks
// each answer held; and of its compactions, each summary by its
// encrypted_content.
type Ledger struct {
	mu          sync.Mutex
	blocks      map[string]issued   // by signature (redacted_thinking: data)
	compactions map[string]string   // encrypted_content → content
	answers     map[string][]string // answer id → its blocks' signatures in order
	toolUses    map[string]string   // tool_use id → answer id
	issuedN     int
	verified    int // blocks sent back and accepted
}

type issued struct {
	Type, Text string
	Prefix     [32]byte
	Answer     string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{blocks: map[string]issued{}, compactions: map[string]string{}, answers: map[string][]string{}, toolUses: map[string]string{}}
}

// Think issues a thinking block with text, produced by answer after the
// request r, and returns its signature.
func (l *Ledger) Think(r *Request, answer, text string) string {
	return l.issue(r, answer, "thinking", text)
}

// Redact issues a redacted_thinking block and returns its data.
func (l *Ledger) Redact(r *Request, answer string) string {
	return l.issue(r, answer, "redacted_thinking", "")
}

func (l *Ledger) issue(r *Request, answer, typ, text string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.issuedN++
	prefix := r.Prompt.Hash(len(r.Prompt.Segments))
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%s|%x", answer, l.issuedN, text, prefix)))
	sig := base64.StdEncoding.EncodeToString(append(h[:], h[:]...))
	l.blocks[sig] = issued{Type: typ, Text: text, Prefix: prefix, Answer: answer}
	l.answers[answer] = append(l.answers[answer], sig)
	return sig
}

// Compact issues a compaction block summarising the request r as summary,
// in answer, and returns its encrypted_content and the request as the
// model reads it after the compaction (tools and system; the compaction
// block opens the answer): issue the answer's thinking against it.
func (l *Ledger) Compact(r *Request, answer, summary string) (encrypted string, after *Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.issuedN++
	h := sha256.Sum256([]byte(fmt.Sprintf("compaction|%s|%d|%s", answer, l.issuedN, summary)))
	encrypted = "cmp_" + base64.StdEncoding.EncodeToString(append(h[:], h[:]...))
	l.compactions[encrypted] = summary
	next := *r
	next.Prompt = r.Prompt.head(r.Prompt.Lead)
	return encrypted, &next
}

// Verified is how many thinking blocks sent back were accepted so far.
func (l *Ledger) Verified() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.verified
}

// ToolUse records that answer called a tool under id.
func (l *Ledger) ToolUse(answer, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.toolUses[id] = answer
}

// verify checks every thinking and compaction block the model reads (from
// the latest compaction on) against what was issued, and that a tool
// loop's latest assistant message keeps all of its thinking.
func (l *Ledger) verify(msgs []message, r *Request) *Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fromM, fromK, _ := readFrom(msgs)
	for i, m := range msgs {
		if m.Role != "assistant" || i < fromM {
			continue
		}
		prefix := r.Prompt.Hash(r.Prompt.MessageStart[i])
		for k, b := range m.Blocks {
			if i == fromM && k < fromK {
				continue // dropped by the API unread
			}
			if b.Type == "compaction" && b.Compacts {
				if summary, ok := l.compactions[b.Signature]; !ok || summary != b.Text {
					return invalid("%s: Invalid `encrypted_content` in `compaction` block", b.Path)
				}
				continue
			}
			if b.Type != "thinking" && b.Type != "redacted_thinking" {
				continue
			}
			is, ok := l.blocks[b.Signature]
			if !ok || is.Type != b.Type || is.Text != b.Text {
				return badSignature(b)
			}
			if is.Prefix != prefix {
				// The signature binds the block to everything before it.
				if !r.DropBlock {
					return badSignature(b)
				}
				r.Dropped = append(r.Dropped, b.Path)
				continue
			}
			l.verified++
		}
	}
	return l.latestKept(msgs)
}

func badSignature(b block) *Error {
	if b.Type == "redacted_thinking" {
		return invalid("%s: Invalid `data` in `redacted_thinking` block", b.Path)
	}
	return invalid("%s: Invalid `signature` in `thinking` block", b.Path)
}

// latestKept: inside a tool loop (the request ends with tool results), the
// latest assistant message must hold every thinking block of the answer it
// is, in order. At a new user turn earlier thinking may be left out.
func (l *Ledger) latestKept(msgs []message) *Error {
	last := len(msgs) - 1
	if last < 1 || msgs[last].Role != "user" || !hasToolResult(msgs[last]) || msgs[last-1].Role != "assistant" {
		return nil
	}
	m := msgs[last-1]
	answer := ""
	for _, b := range m.Blocks {
		if a, ok := l.toolUses[b.ID]; ok && b.Type == "tool_use" {
			answer = a
			break
		}
	}
	want := l.answers[answer]
	k := 0
	for j, b := range m.Blocks {
		if b.Type != "thinking" && b.Type != "redacted_thinking" {
			if k < len(want) && b.Type == "tool_use" {
				return modified(last-1, j)
			}
			continue
		}
		if k >= len(want) || b.Signature != want[k] {
			return modified(last-1, j)
		}
		k++
	}
	if k < len(want) {
		return modified(last-1, len(m.Blocks))
	}
	return nil
}

func modified(i, j int) *Error {
	return invalid("messages.%d.content.%d: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response.", i, j)
}

func hasToolResult(m message) bool {
	for _, b := range m.Blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}
