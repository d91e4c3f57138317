package replay

import (
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// IsSummaryCall reports whether body, a request of format f, is one of
// ctxpress's summary calls: its instructions or its last user message open
// with the summariser's lead (compactor.SummarizerLead), whichever form
// the call takes (the transcript in one user message, or the history
// followed by the instruction).
func IsSummaryCall(f Format, body []byte) bool {
	if !jsonvalid.Valid(body) {
		return false
	}
	wf := wireFormat(f)
	conv, ok := wf.Parse(body)
	return ok && isSummaryConv(f, wf, conv)
}

func isSummaryConv(f Format, wf wire.Format, conv *wire.Conversation) bool {
	opens := func(text string) bool { return strings.HasPrefix(strings.TrimSpace(text), compactor.SummarizerLead) }
	switch f {
	case Responses:
		if opens(gjson.GetBytes(conv.Body, "instructions").String()) {
			return true
		}
	case Messages:
		sys := gjson.GetBytes(conv.Body, "system")
		if opens(sys.String()) || opens(sys.Get("0.text").String()) {
			return true
		}
	}
	lastUser := -1
	for i, m := range conv.Messages {
		switch m.Role {
		case wire.RoleInstruction:
			if opens(messageText(wf, conv, i)) {
				return true
			}
		case wire.RoleUser:
			lastUser = i
		}
	}
	// The last user message is a transcript prompt, or the conversation
	// itself continued with ctxpress's summary instruction (its own
	// message, a text part of its own, or a line after the user's text).
	return lastUser >= 0 && compactor.IsSummaryPrompt(strings.TrimSpace(messageText(wf, conv, lastUser)))
}

// messageText is message i's text items, one per line.
func messageText(wf wire.Format, conv *wire.Conversation, i int) string {
	var b strings.Builder
	r := conv.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(wf.Text(conv, it))
	}
	return b.String()
}

// summaryText is the simulated summariser's answer: the template's
// sections, each with a line (as many as fit), then filler words up to n
// tokens (as Count counts them), the same text for the same n.
func (t *Tokens) summaryText(n int) string {
	t.mu.Lock()
	s, ok := t.summaries[n]
	t.mu.Unlock()
	if ok {
		return s
	}
	var b strings.Builder
	for _, line := range strings.Split(compactor.SummaryTemplate, "\n") {
		if strings.HasPrefix(line, "## ") {
			b.WriteString(line)
			b.WriteString("\nThe replayed session's ")
			b.WriteString(strings.ToLower(strings.TrimPrefix(line, "## ")))
			b.WriteString(", as the summariser wrote it.\n\n")
		}
	}
	head := strings.TrimSpace(b.String())
	if t.Count(head) > n {
		head = truncateTokens(t, head, n)
	}
	filler := strings.Fields(strings.Repeat("the work went on as planned and the tests were run again ", n/4+1))
	text := func(words int) string {
		if words == 0 {
			return head
		}
		return head + " " + strings.Join(filler[:words], " ")
	}
	// The fewest filler words that reach n tokens (a word is about one).
	lo, hi := 0, len(filler)
	for lo < hi {
		mid := (lo + hi) / 2
		if t.Count(text(mid)) >= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s = text(lo)
	t.mu.Lock()
	t.summaries[n] = s
	t.mu.Unlock()
	return s
}

// truncateTokens cuts text to at most n tokens, at a word.
func truncateTokens(t *Tokens, text string, n int) string {
	words := strings.Fields(text)
	lo, hi := 0, len(words)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if t.Count(strings.Join(words[:mid], " ")) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return strings.Join(words[:lo], " ")
}
