package turn

import (
	"github.com/ctxpress/ctxpress/admin"
)

// titleRunes is how much of the user's first ask names a conversation.
const titleRunes = 120

// Describe is what the turn did to the client's request, for the
// dashboard's turn view: every edit of the body it forwards
// (rewrite.Result.Edits), and the body as sent and as forwarded (views of
// the request's own bytes: admin.Kept copies what it keeps).
func (t *Turn) Describe() admin.TurnDetail {
	t.noteEdits()
	return admin.TurnDetail{Key: t.rt.Key, TokensBefore: t.rt.TokensBefore, TokensAfter: t.rt.TokensAfter, Edits: t.rt.Edits,
		Format: t.api.Format, Sent: t.parsed.Body(), Forwarded: t.res.Body, ForwardedOwned: t.res.Changed}
}

// noteEdits has the turn's record entry keep its edits (bounded by the
// record), and the conversation its title and agent (the first ask, when
// the record has none yet; the client's User-Agent), once: Describe and
// an answered Finish both need them, in either order.
func (t *Turn) noteEdits() {
	if t.noted {
		return
	}
	t.noted = true
	t.rt.Edits = t.res.Edits()
	if t.rec.Title == "" {
		t.rt.Title = t.res.FirstAsk(titleRunes)
	}
	if agent := admin.AgentOf(t.header.Peek("User-Agent")); string(agent) != t.rec.Agent {
		t.rt.Agent = string(agent)
	}
}
