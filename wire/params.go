package wire

import (
	"strings"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// ParamRules say how a summary call spells its options for one model, in
// any format. The zero value is the classic chat completions call:
// max_tokens and temperature 0.3.
type ParamRules struct {
	// MaxCompletionTokens sends the length cap as max_completion_tokens:
	// OpenAI's reasoning models refuse max_tokens.
	MaxCompletionTokens bool
	// NoTemperature leaves temperature out, so the server's default
	// applies: OpenAI's reasoning models refuse any value but 1.
	NoTemperature bool
}

// SummaryTemperature keeps summaries close to the transcript while leaving
// the model room to phrase.
const SummaryTemperature = 0.3

// Temperature is the summary call's temperature under r: nil (left out)
// for a model that takes none, else SummaryTemperature.
func (r ParamRules) Temperature() *float64 {
	if r.NoTemperature {
		return nil
	}
	t := SummaryTemperature
	return &t
}

// ReasoningRules are the rules of OpenAI's reasoning models.
var ReasoningRules = ParamRules{MaxCompletionTokens: true, NoTemperature: true}

// reasoningFamilies are the OpenAI model families that take ReasoningRules,
// matched as a prefix of the lower-cased name after any "provider/" part,
// followed by the end or a non-alphanumeric character (o3 and o3-mini, not
// o30). gpt-5-chat accepts temperature, but leaving it out is harmless and
// max_completion_tokens is accepted by every OpenAI chat model.
var reasoningFamilies = []string{"o1", "o3", "o4", "gpt-5"}

// ReasoningHeadroom is added to the summary's cap when it is sent as
// max_completion_tokens: a reasoning model spends part of that cap on
// hidden reasoning, and a cap of the summary's size alone can leave no room
// for the summary (finish_reason "length", empty content). Unused tokens
// are not billed.
const ReasoningHeadroom = 16384

// RulesFor returns the parameter rules of model: ReasoningRules for the
// reasoning families (o1, o3, o4-mini, gpt-5…, also behind a provider
// prefix such as openai/gpt-5-mini), the classic rules for every other
// name. reasoning, when not nil, overrides the table (the config's
// models: {name: {reasoning: true|false}}).
func RulesFor(model string, reasoning *bool) ParamRules {
	if reasoning != nil {
		if *reasoning {
			return ReasoningRules
		}
		return ParamRules{}
	}
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, f := range reasoningFamilies {
		if rest, ok := strings.CutPrefix(name, f); ok && (rest == "" || !isAlnum(rest[0])) {
			return ReasoningRules
		}
	}
	return ParamRules{}
}

// RetryRules returns the rules to try after an answer to a call sent with
// sent, and whether the answer refused one of the parameters sent so that
// the new rules differ. A model that refuses max_tokens is an OpenAI
// reasoning model, which refuses temperature too: both change at once, so
// one retry is enough. A server that does not know max_completion_tokens
// gets max_tokens back.
func RetryRules(sent ParamRules, status int, body []byte) (ParamRules, bool) {
	next := sent
	switch {
	case !sent.MaxCompletionTokens && RefusesParam(status, body, "max_tokens"):
		next = ReasoningRules
	case sent.MaxCompletionTokens && RefusesParam(status, body, "max_completion_tokens"):
		next.MaxCompletionTokens = false
	}
	if !sent.NoTemperature && RefusesParam(status, body, "temperature") {
		next.NoTemperature = true
	}
	return next, next != sent
}

// refusalWords are how servers say a parameter is not accepted:
// "Unsupported parameter" / "Unsupported value" (OpenAI, Azure), "is not
// supported", "does not support" / "don't support" (LiteLLM's
// UnsupportedParamsError), "is deprecated for this model" (Anthropic),
// "Unrecognized request argument" / "Unknown parameter" (OpenAI, Azure),
// "Extra inputs are not permitted" (pydantic servers).
var refusalWords = []string{
	"unsupported", "not supported", "does not support", "doesn't support", "don't support", "do not support",
	"deprecated", "unrecognized request argument", "unknown parameter", "not permitted", "extra_forbidden",
}

// RefusesParam reports whether an answer is a 400 (or 422) that refuses the
// request parameter param as unsupported, unknown or not supported with
// that value: the error's param field or the loc of a pydantic detail names
// it, or its message names it among refusal words. A 400 that names param
// for another reason (OpenAI's "max_tokens is too large") is not a refusal.
func RefusesParam(status int, body []byte, param string) bool {
	if status != 400 && status != 422 {
		return false
	}
	if !jsonvalid.Valid(body) {
		return mentionsRefusal(strings.ToLower(string(body)), param)
	}
	root := gjson.ParseBytes(body)
	msg := strings.ToLower(firstOf(root, "error.message", "error", "message").String())
	// The param field, when set, is the parameter refused; LiteLLM sends
	// "None" for none.
	if p := root.Get("error.param"); p.Type == gjson.String && p.Str != "" && p.Str != "None" {
		if p.Str != param {
			return false
		}
		code := root.Get("error.code").String()
		return code == "unsupported_parameter" || code == "unsupported_value" || code == "unknown_parameter" || hasAny(msg, refusalWords)
	}
	for _, d := range root.Get("detail").Array() {
		loc := d.Get("loc").Array()
		if len(loc) > 0 && loc[len(loc)-1].String() == param && d.Get("type").String() == "extra_forbidden" {
			return true
		}
	}
	return mentionsRefusal(msg, param)
}

// mentionsRefusal reports whether the lower-cased msg names param as a
// whole word (max_tokens, not max_tokens_x), other than as the suggested
// replacement ("use 'max_completion_tokens' instead"), and says it is
// refused.
func mentionsRefusal(msg, param string) bool {
	if !hasAny(msg, refusalWords) {
		return false
	}
	for i := 0; ; {
		j := strings.Index(msg[i:], param)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(param)
		i = start + 1
		if start > 0 && isWordByte(msg[start-1]) || end < len(msg) && isWordByte(msg[end]) {
			continue
		}
		before := strings.TrimRight(msg[:start], "'\"` ")
		if !strings.HasSuffix(before, "use") {
			return true
		}
	}
}

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
