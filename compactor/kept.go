package compactor

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/redact"
	"github.com/ctxpress/ctxpress/wire"
)

// KeptTranscript renders the messages a summary replaces as the text kept
// of them (an expand.KindCompaction original): every message in order,
// whole, each under a header line naming its index in the client's
// messages (first is msgs[0]'s), so a range of lines that starts at a
// header and ends before another holds whole messages:
//
//	=== message 3 [USER] ===
//	Run the tests.
//
//	=== message 4 [ASSISTANT] ===
//	Running them.
//	[Tool call bash (call_1)]: {"cmd":"go test ./..."}
//
//	=== message 5 [TOOL RESULT call_1 bash] ===
//	ok  	example/parse	0.2s
//
// Unlike Transcript it cuts nothing, and tool results are as the client
// sent them (the caller passes them so: rewrite.Compaction.Replaced).
// Secrets are redacted as in the summary (redact.Secrets): the text is
// stored. A message that is not part of the conversation (Omit) is left
// out; n is how many are in.
func KeptTranscript(msgs []Message, first int) (text string, n int) {
	var b strings.Builder
	tools := map[string]string{} // call id → tool name, for the results' headers
	for i := range msgs {
		m := &msgs[i]
		if m.Omit {
			continue
		}
		if n > 0 {
			b.WriteByte('\n')
		}
		n++
		b.WriteString("=== message ")
		b.WriteString(strconv.Itoa(first + i))
		b.WriteByte(' ')
		b.WriteString(keptLabel(m, tools))
		b.WriteString(" ===\n")
		if m.Text != "" {
			b.WriteString(redact.Secrets(m.Text))
			b.WriteByte('\n')
		}
		for _, tc := range m.ToolCalls {
			if tc.ID != "" {
				tools[tc.ID] = tc.Name
			}
			b.WriteString("[Tool call ")
			b.WriteString(oneLine(tc.Name))
			if tc.ID != "" {
				b.WriteString(" (" + oneLine(tc.ID) + ")")
			}
			b.WriteString("]: ")
			b.WriteString(redact.Secrets(tc.Arguments))
			b.WriteByte('\n')
		}
	}
	return b.String(), n
}

// keptLabel is a message's label in KeptTranscript's header: the
// transcript's, a tool result's with its tool's name when known.
func keptLabel(m *Message, tools map[string]string) string {
	if m.Role != wire.RoleTool {
		return strings.TrimSuffix(labels[m.Role], ": ")
	}
	label := "[TOOL RESULT"
	if m.ToolCallID != "" {
		label += " " + oneLine(m.ToolCallID)
	}
	name := m.Name
	if name == "" {
		name = tools[m.ToolCallID]
	}
	if name != "" && name != m.ToolCallID {
		label += " " + oneLine(name)
	}
	return label + "]"
}

// keptMark is what every KeptNote says, and no summary does.
const keptMark = " kept in full, one header line per message; "

// KeptNote is the line a summary block gives when the n messages it
// replaces are kept: where they are, in back's words (expand.Ways.Back of
// the kept transcript's reference and lines). Block places it.
func KeptNote(n int, back string) string {
	what := "The " + strconv.Itoa(n) + " earlier messages this summary replaces are"
	if n == 1 {
		what = "The earlier message this summary replaces is"
	}
	return what + keptMark + oneLine(back)
}

// isKeptNote reports whether line is a KeptNote.
func isKeptNote(line string) bool { return strings.Contains(line, keptMark) }

// dropKeptNotes removes from a summary the lines a summariser copied from
// the block it was shown: the new block has its own, and an old one
// copied into the summary would be sent on after the next compaction.
func dropKeptNotes(summary string) string {
	if !strings.Contains(summary, keptMark) {
		return summary
	}
	lines := strings.Split(summary, "\n")
	lines = slices.DeleteFunc(lines, isKeptNote)
	return strings.Join(lines, "\n")
}
