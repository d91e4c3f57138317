package admin

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// EditInfo is a history.Edit as the admin API shows it.
type EditInfo struct {
	// Kind is "squashed", "deduped", "pruned", "summarised", "cut", or
	// "more" (the edits a bounded list left out: Count of them).
	Kind string `json:"kind"`
	// Index is the message's index in the request as the client sent it
	// (a run's first); Count how many messages (edits, for "more").
	Index int `json:"index"`
	Count int `json:"count"`
	// Name is the tool whose output it was, else the message's role; ""
	// for a run.
	Name         string `json:"name,omitempty"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
}

func editInfos(es []history.Edit) []EditInfo {
	out := make([]EditInfo, 0, len(es))
	for _, e := range es {
		out = append(out, EditInfo{Kind: e.Kind.String(), Index: e.Index, Count: e.Count, Name: e.Name,
			TokensBefore: e.Before, TokensAfter: e.After})
	}
	return out
}

// CompactionMark is a compaction as the turn list marks it, on the turn
// that first sent its summary.
type CompactionMark struct {
	// TokensBefore and TokensAfter are the forwarded request's before
	// the summary and with it: the summary history's figures when it
	// still has this summary, else the previous turn's forwarded size and
	// this one's.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
	// CoveredMessages is how many of the client's messages the summary
	// replaced; 0 when the summary history no longer has it.
	CoveredMessages int `json:"covered_messages,omitempty"`
	// Prepared: the summary was written in the background, ahead of the
	// trigger, and this turn was the first to send it.
	Prepared bool `json:"prepared,omitempty"`
}

// compactionMarks marks, of turns (oldest first), those where a
// compaction happened: a turn that wrote a summary before it was
// forwarded (Compacted), with the summary written during it (after the
// turn before was answered); and the first turn to send a summary
// prepared in the background (one whose summarised run is the summary's
// coverage). A compacted turn whose summary the history (sums, the last
// state.MaxRecentSummaries) no longer has is marked with its own
// numbers. A summary prepared and never sent marks nothing.
func compactionMarks(turns []state.Turn, sums []state.SummaryEntry) []*CompactionMark {
	marks := make([]*CompactionMark, len(turns))
	used := make([]bool, len(sums))
	for i, t := range turns {
		if !t.Compacted {
			continue
		}
		var since time.Time // the turn before was answered
		if i > 0 {
			since = turns[i-1].At
		}
		for j := len(sums) - 1; j >= 0; j-- {
			at := sums[j].At.Truncate(time.Millisecond) // turns are kept to the millisecond
			if !used[j] && !at.After(t.At) && !at.Before(since) {
				used[j] = true
				marks[i] = &CompactionMark{TokensBefore: sums[j].TokensBefore, TokensAfter: sums[j].TokensAfter,
					CoveredMessages: sums[j].CoveredMessages}
				break
			}
		}
		if marks[i] == nil {
			before := t.TokensBefore
			if i > 0 {
				before = turns[i-1].TokensAfter
			}
			marks[i] = &CompactionMark{TokensBefore: before, TokensAfter: t.TokensAfter}
		}
	}
	for j, e := range sums {
		if used[j] || e.CoveredMessages <= 0 {
			continue
		}
		at := e.At.Truncate(time.Millisecond)
		for i, t := range turns {
			if marks[i] == nil && !t.At.Before(at) && summarised(t.Edits) == e.CoveredMessages {
				marks[i] = &CompactionMark{TokensBefore: e.TokensBefore, TokensAfter: e.TokensAfter,
					CoveredMessages: e.CoveredMessages, Prepared: true}
				break
			}
		}
	}
	return marks
}

// summarised is how many messages the summary a turn sent replaced; 0
// when it sent none (or its record does not say).
func summarised(es []history.Edit) int {
	for _, e := range es {
		if e.Kind == history.EditSummarised {
			return e.Count
		}
	}
	return 0
}

// TurnView is one turn as GET /ctxpress/conversations/{id}/turns/{n}
// shows it: its numbers, what was done to the client's messages, and,
// while ctxpress still keeps them, the request as the client sent it and
// as it was forwarded.
type TurnView struct {
	Object    string `json:"object"` // always "conversation.turn"
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	TurnInfo
	// Kept reports that the bodies are shown (Sent, Forwarded); NotKept
	// says why they are not.
	NotKept   string    `json:"not_kept,omitempty"`
	Sent      *BodyView `json:"sent,omitempty"`
	Forwarded *BodyView `json:"forwarded,omitempty"`
}

// BodyView is a request body as the turn view shows it: its instructions
// outside the messages (Anthropic's system, Responses' instructions) and
// its messages, each text cut to a readable length.
type BodyView struct {
	Bytes        int           `json:"bytes"`
	Instructions string        `json:"instructions,omitempty"`
	Messages     []MessageView `json:"messages"`
}

// MessageView is one message of a BodyView.
type MessageView struct {
	Index int    `json:"index"`
	Role  string `json:"role"`
	// Name is the tool whose output (or call) the message carries.
	Name  string `json:"name,omitempty"`
	Bytes int    `json:"bytes"`
	// Text is its text: contents, calls with their arguments, other
	// parts as their size; OmittedBytes how much of it was left out of
	// the middle.
	Text         string `json:"text"`
	OmittedBytes int    `json:"omitted_bytes,omitempty"`
	// Edit is what was done to it (an EditInfo's Kind), in the body as
	// sent; Summary marks the forwarded message that holds the summary.
	Edit    string `json:"edit,omitempty"`
	Summary bool   `json:"summary,omitempty"`
}

// Limits of a message's text in a BodyView: its head and tail, in bytes.
const (
	viewHead = 1600
	viewTail = 400
)

// viewBody reads body (valid JSON, as the turn forwarded or received it)
// with f and shows it, each message marked with the edit of es that
// touched it. A body f does not read shows as its size alone.
func viewBody(f wire.Format, body []byte, es []history.Edit) *BodyView {
	v := &BodyView{Bytes: len(body), Messages: []MessageView{}}
	if f == nil {
		return v
	}
	c, ok := f.Parse(body)
	if !ok {
		return v
	}
	for _, key := range []string{"system", "instructions", "systemInstruction"} {
		if r := gjson.GetBytes(body, key); r.Exists() {
			v.Instructions = instructionsText(r)
			break
		}
	}
	edit := map[int]string{}
	for _, e := range es {
		n := e.Count
		if e.Kind == history.EditMore {
			continue
		}
		for i := e.Index; i < e.Index+max(n, 1); i++ {
			edit[i] = e.Kind.String()
		}
	}
	tools := map[string]string{} // call id -> tool
	for _, it := range c.Items {
		if it.Kind == wire.KindToolCall && it.CallID != "" {
			tools[it.CallID] = it.Tool
		}
	}
	for i, m := range c.Messages {
		mv := MessageView{Index: i, Role: m.WireRole, Bytes: m.End - m.Start, Edit: edit[i]}
		if mv.Role == "" {
			mv.Role = m.Role.String()
		}
		text := ""
		if !m.Object {
			text = string(m.Of(body))
		}
		for it := m.Items.Start; it < m.Items.End; it++ {
			item := &c.Items[it]
			var part string
			switch item.Kind {
			case wire.KindOpaque:
				part = "[" + strconv.Itoa(item.Span.End-item.Span.Start) + " bytes not shown: reasoning, an image or another part]"
			case wire.KindToolCall:
				part = "→ " + item.Tool + " " + f.Arguments(c, it)
				if mv.Name == "" {
					mv.Name = item.Tool
				}
			case wire.KindToolResult:
				part = f.Text(c, it)
				if name := item.Tool; name != "" && mv.Name == "" {
					mv.Name = name
				} else if mv.Name == "" {
					mv.Name = tools[item.CallID]
				}
			default:
				part = f.Text(c, it)
			}
			if text != "" {
				text += "\n"
			}
			text += part
		}
		mv.Summary = strings.Contains(text, summaryTag)
		tail := viewTail
		if mv.Summary { // the summary block ends the message: show it
			tail = 4 * viewHead
		}
		mv.Text, mv.OmittedBytes = cutMiddle(text, viewHead, tail)
		v.Messages = append(v.Messages, mv)
	}
	return v
}

// summaryTag opens the block a summary is forwarded in (compactor.Block).
const summaryTag = "<conversation_summary>"

// instructionsText is a top-level instructions value as text: a string,
// or the text of its parts (Anthropic's system blocks, Gemini's parts),
// else its JSON; the middle cut as a message's is.
func instructionsText(r gjson.Result) string {
	text := r.Raw
	switch {
	case r.Type == gjson.String:
		text = r.Str
	case r.IsArray() || r.IsObject():
		var parts []string
		for _, p := range append(r.Array(), r.Get("parts").Array()...) {
			if t := p.Get("text"); t.Type == gjson.String {
				parts = append(parts, t.Str)
			}
		}
		if len(parts) > 0 {
			text = strings.Join(parts, "\n")
		}
	}
	head, tail := viewHead, viewTail
	if strings.Contains(text, summaryTag) { // the summary goes at the end: show it
		tail = 4 * viewHead
	}
	out, omitted := cutMiddle(text, head, tail)
	if omitted > 0 {
		return out
	}
	return text
}

// cutMiddle is s with its middle left out when it is longer than head
// and tail bytes together (cut on rune boundaries, a line saying how much
// is missing in their place), and how many bytes were left out.
func cutMiddle(s string, head, tail int) (string, int) {
	if len(s) <= head+tail+200 { // not worth a marker
		return s, 0
	}
	h, t := head, len(s)-tail
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	omitted := t - h
	return s[:h] + "\n… " + strconv.Itoa(omitted) + " bytes not shown …\n" + s[t:], omitted
}

// showTurn answers GET /ctxpress/conversations/{id}/turns/{n}?namespace=:
// turn n of the conversation (TurnInfo.Number). An id in several
// namespaces needs the namespace.
func (a *Admin) showTurn(ctx *fasthttp.RequestCtx, id, num string) {
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		writeError(ctx, fasthttp.StatusBadRequest, "bad_request", "a turn is a number from 1")
		return
	}
	recs, err := a.conversations().find(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		a.conversationError(ctx, "read", err)
		return
	}
	if len(recs) > 1 {
		writeError(ctx, fasthttp.StatusBadRequest, "namespace_needed", "conversations in several namespaces have this id: give ?namespace=")
		return
	}
	r := recs[0]
	i := n - turnNumber(r, 0)
	if i < 0 || i >= len(r.Turns) {
		writeError(ctx, fasthttp.StatusNotFound, "turn_not_found",
			"no such turn: the record keeps the last "+strconv.Itoa(state.MaxTurns)+" of a conversation's turns")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, turnViewOf(r, i, a.kept))
}

// turnViewOf is r's turn i as its turn view shows it, its bodies when
// kept has them.
func turnViewOf(r state.Record, i int, kept *Kept) TurnView {
	v := TurnView{Object: "conversation.turn", ID: r.Key.ID, Namespace: r.Key.Namespace, TurnInfo: turnInfoOf(r, i)}
	v.Compaction = compactionMarks(r.Turns, r.RecentSummaries)[i]
	kt, ok := kept.find(r.Key, r.Turns[i])
	if !ok {
		v.NotKept = "not kept: ctxpress keeps the bodies of a conversation's last " + strconv.Itoa(KeptPerConversation) +
			" turns, in memory, while a dashboard is open or for " + strconv.Itoa(int(KeptWatch/time.Minute)) +
			" minutes after the admin API was last used; this turn is older, came while nobody looked, or ctxpress restarted since"
		return v
	}
	v.Kept = true
	v.Edits = editInfos(kt.edits) // every edit, not the record's largest
	fwd := kt.forwarded
	if fwd == nil {
		fwd = kt.sent
	}
	v.Sent, v.Forwarded = viewBody(kt.format, kt.sent, kt.edits), viewBody(kt.format, fwd, nil)
	return v
}
