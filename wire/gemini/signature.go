package gemini

import "github.com/ctxpress/ctxpress/wire"

// Thought signatures. Google's rules (ai.google.dev/gemini-api/docs/
// thought-signatures): a signature is returned on a part of the model's
// answer (the first functionCall of each step, else the last part) and must
// come back on that part, as sent; parts with a signature are never merged
// with others. Gemini 3 validates the current turn only (the calls after
// the latest user content of text): a first functionCall of a step there
// without its signature is refused with a 400. For history the model did
// not produce as it is sent (another model's, or calls a client injected),
// Google documents a dummy signature that skips the validation.
//
// ctxpress treats a history with signatures as bound (wire.Conversation.
// Bound): every rewrite is sticky, and where a summary or cut changed what
// came before a kept model content (LeaveOut), the signatures minted over
// the old prefix are not sent over the new one: thought parts go whole
// (they hold nothing but the model's thoughts), and every other signed
// part keeps its place and a signature, DummySignature, so a step's first
// call still carries one wherever the API validates it. A signature is
// never moved to another part, and never sent without its part.

// DummySignature is the thoughtSignature Google documents for history
// parts that carry no signature of the model's own (the FAQ of its
// thought-signatures guide; Gemini CLI sends it for the same reason).
const DummySignature = "skip_thought_signature_validator"

// LeaveOut returns the edits, relative to the start of model content m,
// that leave out its thought parts with their commas and give its other
// signed parts DummySignature, and the tokens removed; false when it has
// no bound part, or nothing but thought parts (a content may not be left
// without parts).
func (Format) LeaveOut(c *wire.Conversation, m int, count wire.Count) ([]wire.Edit, int, bool) {
	items := c.ItemsOf(m)
	parts := make([]Part, len(items))
	bound, other := 0, 0
	for i, it := range items {
		parts[i] = readPart(c.Body, it.Span.Start)
		if it.Bound {
			bound++
		}
		if !parts[i].Thought {
			other++
		}
	}
	if bound == 0 || other == 0 {
		return nil, 0, false
	}
	at := c.Messages[m].Start
	dummy := wire.AppendJSONString(nil, DummySignature)
	var eds []wire.Edit
	tokens := 0
	for a := 0; a < len(items); a++ {
		if !parts[a].Thought {
			if s := parts[a].Signature; s.Exists() && string(s.Of(c.Body)) != string(dummy) {
				eds = append(eds, wire.Edit{Start: s.Start - at, End: s.End - at, Repl: dummy})
			}
			continue
		}
		b := a
		for b < len(items) && parts[b].Thought {
			tokens += opaqueTokens(c.Body, parts[b], count)
			b++
		}
		// A run of parts goes with the comma before it, or, first in the
		// list, with the comma after it.
		if a > 0 {
			eds = append(eds, wire.Edit{Start: items[a-1].Span.End - at, End: items[b-1].Span.End - at})
		} else {
			eds = append(eds, wire.Edit{Start: items[a].Span.Start - at, End: items[b].Span.Start - at})
		}
		a = b - 1
	}
	return eds, tokens, true
}

// DropMismatched reports false: the Gemini API has no setting that drops
// the parts whose prefix changed, and rewriting every signature of the
// kept tool loop would be an edit over the whole of it. The loop's
// signatures stay as the model minted them: Google validates their
// presence and integrity (signatures are bound to the API that minted
// them, not to the prefix: Gemini CLI sends its active loop's with their
// signatures after compressing the history before them, and strips them
// only when it changes from one Google backend to the other), and a dummy
// in their place would take the model's thoughts from it mid-loop.
func (Format) DropMismatched(*wire.Conversation) (wire.Edit, bool) { return wire.Edit{}, false }
