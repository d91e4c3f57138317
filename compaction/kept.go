package compaction

import (
	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
)

// keep stores the messages ti's compaction (prop) replaces as one original
// of kind expand.KindCompaction in the conversation's namespace: a
// readable transcript of them as the client sent them
// (compactor.KeptTranscript). It returns where they are and the line the
// summary block gives, worded with the configured ways back; nothing
// without a store of originals or when storing fails, and the summary is
// then sent without its line.
func (c *Engine) keep(ti Input, prop rewrite.Compaction) history.Kept {
	if c.originals == nil {
		return history.Kept{}
	}
	first, msgs := prop.Replaced()
	text, n := compactor.KeptTranscript(msgs, first)
	if n == 0 {
		return history.Kept{}
	}
	o := expand.New(expand.KindCompaction, "", text)
	if err := c.originals.PutOriginals(ti.Key.Namespace, []expand.Original{o}); err != nil {
		// The store's failures are the keeper's to report (rate-limited).
		c.log.Debug().Err(err).Str("conversation", ti.Key.ID).Msg("cannot keep the messages a summary replaces; its block will not offer them")
		return history.Kept{}
	}
	return history.Kept{Ref: o.Ref, First: first, Last: first + len(msgs) - 1,
		Note: compactor.KeptNote(n, c.cfg.Ways.Back(o.Ref, expand.AllLines(text)))}
}
