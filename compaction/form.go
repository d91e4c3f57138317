package compaction

import (
	"context"
	"errors"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/baseurl"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/messages"
)

// historyReserve is the room left beside a history summary call's prompt
// and answer for the estimate's error (tokens).
const historyReserve = 256

// historyFacts are what decides a summary call's form.
type historyFacts struct {
	// OwnUpstream: the summariser is the conversation's upstream
	// (summarizer.base_url empty or the same URL); SameAPI: the call
	// speaks the conversation's format; SameModel: the summary model is
	// the request's. Only then does the provider hold the history in its
	// prompt cache under the same key.
	OwnUpstream, SameAPI, SameModel bool
	// ServerHistory: the provider keeps the history (Responses
	// previous_response_id); the body holds only part of it.
	ServerHistory bool
	// Refused: the upstream refused the request as too long (a rescue).
	Refused bool
	// LeftOut: the forwarded body left messages out to fit the window,
	// messages the summary must still cover.
	LeftOut bool
	// Window is the model's context window; Tokens the history and the
	// instruction in the upstream's tokens (calibrated), Answer the cap
	// the call reserves for the answer.
	Window, Tokens, Answer int
}

// continuesHistory reports whether a summary call sends the conversation
// as forwarded with the instruction appended, so the provider bills the
// history as cached and a local server skips its prefill; otherwise it
// sends a transcript of the covered messages.
func continuesHistory(f historyFacts) bool {
	switch {
	case !f.OwnUpstream || !f.SameAPI || !f.SameModel:
		return false // another summariser holds no cache of this history
	case f.ServerHistory, f.Refused, f.LeftOut:
		return false
	}
	return f.Tokens+f.Answer+historyReserve <= f.Window
}

// historyInput is what a history summary call of ti is made from.
type historyInput struct {
	ti   Input
	prop rewrite.Compaction
	call SummaryRequest // the transcript call's, to reuse
	cal  float64        // the conversation's calibration
}

// historyCall returns the summary call of ti that continues its forwarded
// history, and false when the transcript form is the one to send
// (continuesHistory). The history goes to the upstream that already
// received it, byte for byte: the transcript's redaction (redact.Secrets)
// has nothing to protect there.
func (c *Engine) historyCall(in historyInput) (SummaryRequest, bool) {
	ti, prop := in.ti, in.prop
	history := ti.history()
	if history == nil {
		return SummaryRequest{}, false
	}
	hp := compactor.HistoryInput{Window: c.summaryWindow(ti, in.call.Model), Prev: compactor.HoldsBlock(history)}
	for _, m := range prop.Messages[prop.Cut:prop.Since] {
		if m.Omit { // a /compact exchange: never forwarded
			continue
		}
		if hp.Kept == 0 {
			hp.FirstKept = m
		}
		hp.Kept++
	}
	call := in.call
	call.Prompt, call.History = compactor.HistoryPrompt(hp), history
	if call.API == APIMessages {
		// The history's fields may need the client's betas, and drop_block
		// its own.
		call.AnthropicVersion, call.AnthropicBeta = ti.Creds.Version, ti.Creds.Beta
		if merged, added := messages.WithBeta([]string{call.AnthropicBeta}, messages.BetaThinkingBinding); added && messages.AsksDropBlock(history) {
			call.AnthropicBeta = merged
		}
	}
	answer, err := c.sum.AnswerCap(call)
	if err != nil {
		return SummaryRequest{}, false // the history cannot take the instruction
	}
	api := c.summaryAPI(ti.API)
	if api == "" {
		api = APIChat
	}
	f := historyFacts{
		OwnUpstream: c.cfg.Summarizer.BaseURL == "" || baseurl.Same(c.cfg.Summarizer.BaseURL, c.routes[ti.API].Upstream),
		SameAPI:     api == ti.API, SameModel: in.call.Model == ti.Res.Model,
		ServerHistory: ti.Res.ServerHistory, Refused: ti.Kind == kindRescue, LeftOut: ti.FitDropped > 0,
		Window: hp.Window, Answer: answer,
		Tokens: scaled(ti.Res.TokensAfter+c.pipeline.Counter().CountText(in.call.Model, call.Prompt), max(in.cal, 1)),
	}
	ok := continuesHistory(f)
	c.log.Debug().Str("conversation", ti.Key.ID).Bool("continues_history", ok).Int("history_tokens", f.Tokens).
		Int("answer_tokens", f.Answer).Int("window", f.Window).Msg("summary call form")
	return call, ok
}

// history is the body ti's summary call continues: the one forwarded at
// its turn (a precompaction), else this request's as rewritten. A
// "/compact" command that ends it stays: the instruction joins it, and the
// client's cache marker on it is where Anthropic looks for the cached
// prefix.
func (ti *Input) history() []byte {
	if ti.Forwarded != nil {
		return ti.Forwarded
	}
	return ti.Res.Body
}

// summarize makes ti's summary call: first continuing the forwarded
// history when that form applies (historyCall), then, when it does not or
// that call falls back (fallsBack), the transcript form, with half the
// transcript once when that is refused as too long.
func (c *Engine) summarize(in historyInput, sum compactor.Summary) (SummaryResult, state.Usage, error) {
	var spent state.Usage
	call1 := func(call SummaryRequest) (SummaryResult, error) {
		sr, err := c.sum.Summarize(context.Background(), call)
		spent = spent.Plus(summaryUsage(sr))
		return sr, err
	}
	if call, ok := c.historyCall(in); ok {
		sr, err := call1(call)
		if !fallsBack(err) {
			return sr, spent, err
		}
		msg := "summary call continuing the conversation failed; sending a transcript instead"
		if errors.Is(err, wire.ErrProviderCompacted) {
			msg = "the provider compacted the summary call continuing the conversation instead of answering it; sending a transcript instead"
		}
		c.log.Info().Err(err).Str("conversation", in.ti.Key.ID).Msg(msg)
	}
	call := in.call
	transcript := func(sum compactor.Summary) (SummaryResult, error) {
		call.Prompt = sum.Prompt()
		return call1(call)
	}
	sr, err := transcript(sum)
	if errors.Is(err, wire.ErrContextOverflow) {
		c.log.Info().Str("conversation", in.ti.Key.ID).Msg("summary request over the summariser's window; retrying with half the transcript")
		sr, err = transcript(sum.Halved())
	}
	return sr, spent, err
}

// fallsBack reports whether a history summary call's error leaves the
// transcript form worth a try: the upstream refused the call itself (a
// strict template, a field it takes from clients but not here, a window
// the estimate missed) or the model called a tool instead of writing the
// summary, or the provider compacted the call instead of answering (a
// transcript asks for no compaction). Not after a failure the transcript
// would meet as well: the upstream down, overloaded or not answering, a
// garbled or empty answer.
func fallsBack(err error) bool {
	return errors.Is(err, wire.ErrRefused) || errors.Is(err, wire.ErrContextOverflow) ||
		errors.Is(err, wire.ErrToolCallReply) || errors.Is(err, wire.ErrNoHistoryForm) ||
		errors.Is(err, wire.ErrProviderCompacted)
}
