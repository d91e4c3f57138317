package compactor

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/wire"
)

// HistoryLead opens the instruction of a summary call that sends the
// conversation itself (HistoryPrompt), in the last user message: how such
// a call is told from a turn of the conversation.
const HistoryLead = "[Context checkpoint request]"

// historyOpening stops the agent: the instruction arrives where the next
// user turn would, in a conversation full of tools and tasks, so it says
// first that it is neither.
const historyOpening = HistoryLead + " This message is not from the user and not part of the task: stop the work for this one reply. " +
	"Do not call any tool, do not answer the user and do not continue the conversation. " +
	SummarizerLead + " The conversation above has grown too long for the context window: its earlier part will be replaced by the summary you write now, " +
	"and the assistant will continue from that summary with no other memory of what it covers."

// historyRules are SummarizerPreamble's rules for a summary of the
// conversation itself.
const historyRules = `Rules:
- Be factual and specific. Keep exact values verbatim: file paths, function and class names, ids, URLs, versions, commands, error messages, numbers, and the user's own wording for requirements.
- Record what was actually done and its outcome, not what was planned. Drop chit-chat, repeated output and anything superseded by later turns.
- Never include credentials (keys, tokens, passwords).
- Output only the summary in the template's Markdown format, with every section heading present (write "None" under a heading with nothing to say).`

// compactHistoryOpening and compactHistoryRules are the small-window
// versions, as compactPreamble is of SummarizerPreamble.
const (
	compactHistoryOpening = HistoryLead + " Not from the user: stop the task for this one reply, call no tool, answer no one. " +
		SummarizerLead + " Summarise the conversation above for an assistant that continues from your summary alone."
	compactHistoryRules = `Keep exact paths, names, commands, errors and numbers. Never include credentials. Write every section heading below ("None" when empty).`
)

// quoteChars bounds the quote of the first kept message: enough to find
// it, short enough not to be taken for an instruction.
const quoteChars = 120

// HistoryInput says what a summary of the conversation itself covers.
type HistoryInput struct {
	// Window is the summariser's window in its tokens (0: unknown); below
	// CompactPromptBelow the instruction is the compact one.
	Window int
	// Kept is how many of the conversation's last messages stay verbatim
	// after the summary (0: none, the whole conversation is summarised),
	// and FirstKept the first of them.
	Kept      int
	FirstKept Message
	// Prev reports that the conversation holds a <conversation_summary>
	// of turns compacted earlier, which the new summary replaces too.
	Prev bool
}

// HistoryPrompt is the instruction appended to the conversation in a
// summary call that sends the conversation itself, so the provider's
// prompt cache holds all of it: what to summarise (everything before the
// first of the last Kept messages, which it quotes: a count alone is
// easy to get wrong), that a previous summary is to be folded in, the
// rules and the template. Below CompactPromptBelow every part is the
// short one: in a 2k window the instruction is a fifth of the call.
func HistoryPrompt(in HistoryInput) string {
	p := historyParts
	if in.Window > 0 && in.Window < CompactPromptBelow {
		p = compactHistoryParts
	}
	var b strings.Builder
	b.WriteString(p.opening)
	b.WriteString("\n\n")
	if in.Kept > 0 {
		fmt.Fprintf(&b, p.scope, Describe(in.FirstKept), in.Kept)
	} else {
		b.WriteString(p.whole)
	}
	if in.Prev {
		b.WriteString(" ")
		b.WriteString(p.prev)
	}
	b.WriteString("\n\n")
	b.WriteString(p.rules)
	b.WriteString("\n\nWrite the summary with exactly these sections, in this order:\n\n")
	b.WriteString(p.template)
	return b.String()
}

// historyText is a HistoryPrompt's wording: scope is a format of the
// first kept message's description and the count kept.
type historyText struct{ opening, scope, whole, prev, rules, template string }

var (
	historyParts = historyText{
		opening: historyOpening,
		scope: "What to summarise: the conversation above up to %s. That message and the ones after it (%d in all) stay in the context verbatim after your summary: " +
			"leave them out of it, and write ## Active Task as of the point where the summarised part ends.",
		whole: "What to summarise: the whole conversation above.",
		prev: "The conversation opens with a " + blockOpen + " of turns compacted earlier; it is replaced too: fold every fact of it that is still true into your summary, " +
			"updated by the turns after it, as ONE summary in the template (do not nest it or summarise it as a whole).",
		rules: historyRules, template: SummaryTemplate,
	}
	compactHistoryParts = historyText{
		opening: compactHistoryOpening,
		scope:   "Summarise only what comes before %s: from it on (%d messages) all stays verbatim.",
		whole:   "Summarise all of it.",
		prev:    "Fold the " + blockOpen + " at its start into yours: one summary.",
		rules:   compactHistoryRules, template: compactTemplate,
	}
)

// Describe names a message so a model can find it in the conversation:
// its role and the start of its text, quoted, or the tools it calls, or
// the call it answers.
func Describe(m Message) string {
	quote := ""
	if t := excerpt(m.Text); t != "" {
		quote = fmt.Sprintf(" %q", t)
	}
	switch m.Role {
	case wire.RoleUser:
		return "the user's message" + quote
	case wire.RoleTool:
		id := m.ToolCallID
		if id == "" {
			id = m.Name
		}
		return fmt.Sprintf("the result of tool call %s%s", oneLine(id), quote)
	case wire.RoleAssistant:
		if quote == "" && len(m.ToolCalls) > 0 {
			c := m.ToolCalls[0]
			return fmt.Sprintf("the assistant's call to %s(%s)", oneLine(c.Name), excerpt(c.Arguments))
		}
		return "the assistant's message" + quote
	case wire.RoleInstruction:
		return "the system message" + quote
	}
	return "the message" + quote
}

// HoldsBlock reports whether a body holds a summary block (Block).
func HoldsBlock(body []byte) bool { return bytes.Contains(body, []byte(blockOpen)) }

// excerpt is the start of s on one line, at most quoteChars.
func excerpt(s string) string {
	t := strings.TrimSpace(oneLine(s))
	if len(t) > quoteChars {
		t = t[:runeFloor(t, quoteChars)] + "…"
	}
	return t
}

// IsSummaryPrompt reports whether text, a request's last user text, is a
// summary call's: a transcript prompt (opening with SummarizerLead) or the
// instruction HistoryPrompt appends, alone or on a line of its own after
// the user's own text (texts joined by blank lines or newlines).
func IsSummaryPrompt(text string) bool {
	return strings.HasPrefix(text, SummarizerLead) || strings.HasPrefix(text, HistoryLead) ||
		strings.Contains(text, "\n"+HistoryLead)
}
