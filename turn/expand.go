package turn

import (
	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// MaxExpandRounds is how many times one turn asks the upstream again
// after answering calls of the retrieval tool itself; an answer that
// still calls it after that is relayed as it is.
const MaxExpandRounds = 3

// expandTool is the retrieval tool as every format offers it: the same
// bytes on every request, so that the provider's cached prefix holds.
var expandTool = wire.Tool{Name: expand.ToolName, Description: expand.ToolDescription, Parameters: expand.ToolParameters}

// expanding is what a turn did with the retrieval tool.
type expanding struct {
	offered bool // the forwarded body offers the tool
	rounds  int  // times the upstream was asked again
	calls   int  // calls answered
	// first is the usage of the first answer, of the request as forwarded
	// (what calibrates); hidden sums what every other part of the hidden
	// exchange used (billed on top).
	first  wire.Usage
	hidden wire.Tokens
}

// originals is where the retrieval tool reads originals: the store, when
// it keeps them; nil when the tool is off (ExpandTool unset, observe mode,
// or a store that keeps none).
func (ts *Turns) originals() state.Originals {
	if !ts.ExpandTool || ts.Observe {
		return nil
	}
	o, _ := ts.Store.(state.Originals)
	return o
}

// withTool returns body with the retrieval tool last in its tools, when
// the tool is on and body offers tools of its own.
func (t *Turn) withTool(body []byte) []byte {
	tools, ok := t.api.Format.(wire.Tools)
	if !ok || t.ts.originals() == nil {
		return body
	}
	out, offered := tools.OfferTool(body, expandTool)
	t.x.offered = t.x.offered || offered
	return out
}

// AnswerHook is what the shell gives each whole 2xx answer when the
// forwarded body offers the retrieval tool; nil when it does not, and the
// answer is relayed as it arrives. See Answered.
func (t *Turn) AnswerHook() func(sent, answer []byte) ([]byte, bool) {
	if !t.x.offered {
		return nil
	}
	return t.Answered
}

// Answered is given a whole 2xx answer (plain bytes: a JSON object or an
// event stream) to sent, the body last forwarded. When the answer calls
// the retrieval tool, and fewer than MaxExpandRounds were asked, it
// answers those calls from the conversation's originals and returns the
// body to ask with instead: sent with the answer's turn (its calls of the
// client's tools left out: the model calls them again once it has read)
// and the results appended. again false: the answer is the client's, as
// it is.
func (t *Turn) Answered(sent, answer []byte) (next []byte, again bool) {
	tools, ok := t.api.Format.(wire.Tools)
	originals := t.ts.originals()
	if !ok || originals == nil || t.x.rounds >= MaxExpandRounds {
		return nil, false
	}
	a, ok := tools.ReadAnswer(answer)
	if !ok {
		return nil, false
	}
	own := func(c wire.Call) bool { return c.Name == expand.ToolName }
	var results []wire.CallResult
	for _, c := range a.Calls() {
		if own(c) {
			var got expand.Original
			text, isErr := expand.Retrieve(c.Arguments, func(ref string) (expand.Original, bool, error) {
				o, ok, err := originals.GetOriginal(t.ns, ref)
				got = o
				return o, ok, err
			})
			results = append(results, wire.CallResult{Call: c, Text: text, IsError: isErr})
			if k := t.ts.Keeper; !isErr && k != nil && k.Retrieved != nil {
				k.Retrieved(got.Kind, got.Tool, "tool")
			}
		}
	}
	if len(results) == 0 {
		return nil, false
	}
	next, err := a.Continue(sent, own, results)
	if err != nil {
		t.ts.Log.Info().Str("conversation", t.id.ID).Err(err).Msg("the answer calls " + expand.ToolName + " where it cannot be answered; relayed as it is")
		return nil, false
	}
	t.x.spent(a.Usage())
	t.x.rounds++
	t.x.calls += len(results)
	return next, true
}

// spent counts the usage of an answer that called the tool.
func (x *expanding) spent(u wire.Usage) {
	if x.rounds == 0 {
		x.first = u
		x.hidden.OutputTokens += u.OutputTokens
		return
	}
	x.hidden = plus(x.hidden, tokensOf(u))
}

// billed is usage, the relayed answer's, as the turn reports it: with
// hidden rounds, the first answer's input (the request as forwarded,
// what calibrates), the relayed answer's output, and every other part in
// Hidden.
func (x *expanding) billed(usage wire.Usage) wire.Usage {
	if x.rounds == 0 {
		return usage
	}
	u := x.first
	u.OutputTokens, u.Found = usage.OutputTokens, x.first.Found || usage.Found
	in := tokensOf(usage)
	in.OutputTokens = 0
	u.Hidden = plus(x.hidden, in)
	return u
}

func tokensOf(u wire.Usage) wire.Tokens {
	return wire.Tokens{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens}
}

func plus(a, b wire.Tokens) wire.Tokens {
	return wire.Tokens{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens,
		CachedTokens: a.CachedTokens + b.CachedTokens, CacheWriteTokens: a.CacheWriteTokens + b.CacheWriteTokens}
}

// log adds the hidden exchange to the access-log line.
func (x *expanding) log(ev *zerolog.Event) *zerolog.Event {
	if x.rounds == 0 {
		return ev
	}
	return ev.Int("expand_calls", x.calls).Int("expand_rounds", x.rounds).
		Int("expand_input_tokens", x.hidden.InputTokens).Int("expand_output_tokens", x.hidden.OutputTokens)
}
