package turn

import (
	"github.com/ctxpress/ctxpress/admin"
)

// titleRunes is how much of the user's first ask names a conversation.
const titleRunes = 120

// Describe is what the turn did to the client's request, for the
// dashboard's turn view: every edit of the body it forwards
// (rewrite.Result.Edits), and the body as sent and as forwarded (views of
// the request's own bytes: admin.Kept copies what it keeps). It also has
// the turn's record entry keep the edits (bounded by the record), and
// the conversation its title and agent (the first ask, when the record
// has none yet; the client's User-Agent): call it once the answer is in,
// before Finish.
func (t *Turn) Describe() admin.TurnDetail {
	edits := t.res.Edits()
	t.rt.Edits = edits
	if t.rec.Title == "" {
		t.rt.Title = t.res.FirstAsk(titleRunes)
	}
	if agent := admin.AgentOf(t.header.Peek("User-Agent")); string(agent) != t.rec.Agent {
		t.rt.Agent = string(agent)
	}
	return admin.TurnDetail{Key: t.rt.Key, TokensBefore: t.rt.TokensBefore, TokensAfter: t.rt.TokensAfter, Edits: edits,
		Format: t.api.Format, Sent: t.parsed.Body(), Forwarded: t.res.Body, ForwardedOwned: t.res.Changed}
}
