package compactor

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/redact"
	"github.com/ctxpress/ctxpress/wire"
)

// Per-message head+tail truncation, in chars (bytes, cut on rune
// boundaries). The head carries what a message is about, the tail how it
// ended (the error, the exit status, the conclusion); the middle of a long
// log or file listing is what a summary can best do without.
const (
	bodyHead   = 6000 // user/assistant/system text
	bodyTail   = 1500
	resultHead = 4000 // tool results: noisier, so a smaller head
	resultTail = 1500
	argsHead   = 900 // tool call arguments: 1200 chars in all
	argsTail   = 300
)

const (
	// truncMarker replaces the removed middle of a message body.
	truncMarker = "\n...[truncated]...\n"
	// argsMarker replaces the removed middle of tool call arguments, inline.
	argsMarker = "...[truncated]..."
	// capMarker replaces the whole messages dropped by the global cap.
	capMarker = "...[%d messages truncated]..."
	// msgSep separates messages in the transcript.
	msgSep = "\n\n"
)

// Transcript serialises msgs for the summariser, one message per paragraph:
//
//	[USER]: text
//	[ASSISTANT]: text [Tool calls: name(args), name(args)]
//	[TOOL RESULT id]: text
//
// ([SYSTEM]: for an instruction, [UNKNOWN]: for a message of no role ctxpress
// knows); an Omit message is left out.
// Secrets are redacted first (redact.Secrets), so a truncation can never
// leave half a key behind. Then message bodies longer than 6000+1500 chars keep their
// first 6000 and last 1500, tool results their first 4000 and last 1500,
// tool call arguments their first 900 and last 300; the middle becomes
// "...[truncated]...".
//
// With maxChars > 0 the whole transcript is at most maxChars long: whole
// messages are dropped from the middle and replaced by
// "...[N messages truncated]...", keeping about a third of the room for the
// start and the rest for the most recent messages; a single message larger
// than its share is itself cut head+tail.
func Transcript(msgs []Message, maxChars int) string {
	parts := make([]string, 0, len(msgs))
	total := 0
	for i := range msgs {
		if msgs[i].Omit {
			continue
		}
		parts = append(parts, renderMessage(&msgs[i]))
		total += len(parts[len(parts)-1])
	}
	total += len(msgSep) * max(len(parts)-1, 0)
	if maxChars <= 0 || total <= maxChars {
		return strings.Join(parts, msgSep)
	}
	return capTranscript(parts, maxChars)
}

// labels are the transcript's labels of the roles other than a tool
// result's, which names its call. They name what a message is, not what
// a wire format calls it (a developer message is an instruction too).
var labels = map[wire.Role]string{
	wire.RoleInstruction: "[SYSTEM]: ",
	wire.RoleUser:        "[USER]: ",
	wire.RoleAssistant:   "[ASSISTANT]: ",
	wire.RoleOther:       "[UNKNOWN]: ",
}

// renderMessage renders one message with its label, redacted and truncated.
func renderMessage(m *Message) string {
	var b strings.Builder
	switch m.Role {
	case wire.RoleTool:
		id := m.ToolCallID
		if id == "" {
			id = m.Name
		}
		b.WriteString("[TOOL RESULT ")
		b.WriteString(oneLine(id))
		b.WriteString("]: ")
		b.WriteString(truncateMiddle(redact.Secrets(m.Text), resultHead, resultTail, truncMarker))
		return b.String()
	default:
		b.WriteString(labels[m.Role])
	}
	text := truncateMiddle(redact.Secrets(m.Text), bodyHead, bodyTail, truncMarker)
	b.WriteString(text)
	if len(m.ToolCalls) > 0 {
		if text != "" {
			b.WriteByte(' ')
		}
		b.WriteString("[Tool calls: ")
		for i, tc := range m.ToolCalls {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(oneLine(tc.Name))
			b.WriteByte('(')
			b.WriteString(truncateMiddle(redact.Secrets(tc.Arguments), argsHead, argsTail, argsMarker))
			b.WriteByte(')')
		}
		b.WriteByte(']')
	}
	return b.String()
}

// oneLine keeps a label (role, id, tool name) on its line, so a hostile or
// broken id cannot forge the next message's label.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// truncateMiddle keeps the first head and last tail chars of s around
// marker. s is returned as is when cutting would not make it shorter.
func truncateMiddle(s string, head, tail int, marker string) string {
	if len(s) <= head+tail+len(marker) {
		return s
	}
	return s[:runeFloor(s, head)] + marker + s[runeCeil(s, len(s)-tail):]
}

// fitMiddle cuts s to at most limit chars, keeping three quarters of the
// room for its head.
func fitMiddle(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	keep := limit - len(truncMarker)
	if keep < 32 { // too small for head+tail to mean anything
		return s[:runeFloor(s, max(limit, 0))]
	}
	h := keep * 3 / 4
	return truncateMiddle(s, h, keep-h, truncMarker)
}

// runeFloor returns the largest rune boundary <= i in s.
func runeFloor(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeCeil returns the smallest rune boundary >= i in s.
func runeCeil(s string, i int) int {
	if i <= 0 {
		return 0
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// capTranscript joins parts in at most maxChars: a head of whole messages
// within a third of the room, a tail of whole messages in the rest, and the
// count of dropped messages between them.
func capTranscript(parts []string, maxChars int) string {
	n := len(parts)
	if n == 1 {
		return fitMiddle(parts[0], maxChars)
	}
	avail := maxChars - len(fmt.Sprintf(capMarker, n)) - 2*len(msgSep)
	if avail < 64 {
		return fitMiddle(strings.Join(parts, msgSep), maxChars)
	}

	var head []string
	used, i := 0, 0
	for ; i < n-1; i++ {
		need := len(parts[i]) + len(msgSep)
		if used+need > avail/3 {
			break
		}
		head = append(head, parts[i])
		used += need
	}
	if i == 0 { // the opening message alone is over the head's share: keep its start
		if p := fitMiddle(parts[0], avail/3-len(msgSep)); len(p) >= 32 {
			head = append(head, p)
			used += len(p) + len(msgSep)
		}
		i = 1
	}

	var tail []string // reversed
	usedT, j := 0, n
	for ; j > i; j-- {
		need := len(parts[j-1]) + len(msgSep)
		if used+usedT+need > avail {
			break
		}
		tail = append(tail, parts[j-1])
		usedT += need
	}
	if j == n { // the latest message alone is over the rest: keep its head and tail
		if p := fitMiddle(parts[n-1], avail-used-len(msgSep)); len(p) >= 32 {
			tail = append(tail, p)
		}
	}

	var b strings.Builder
	b.Grow(maxChars)
	for _, p := range head {
		b.WriteString(p)
		b.WriteString(msgSep)
	}
	if dropped := n - len(head) - len(tail); dropped > 0 {
		fmt.Fprintf(&b, capMarker, dropped)
		b.WriteString(msgSep)
	}
	for k := len(tail) - 1; k >= 0; k-- {
		b.WriteString(tail[k])
		if k > 0 {
			b.WriteString(msgSep)
		}
	}
	out := strings.TrimSuffix(b.String(), msgSep)
	return out[:runeFloor(out, maxChars)] // never reached in practice; keeps the promise exact
}
