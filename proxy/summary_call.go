package proxy

import (
	"bytes"
	"github.com/ctxpress/ctxpress/compaction"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// Anthropic's request headers besides its key (HeaderAPIKey).
const (
	headerAnthropicVersion = "Anthropic-Version"
	headerAnthropicBeta    = "Anthropic-Beta"
)

// betaThinkingBinding is the anthropic-beta that opens
// thinking.block_binding: without it a request that asks drop_block
// (rewrite.Result.DropMismatched) is refused.
const betaThinkingBinding = "thinking-binding-controls-2026-08-01"

// withBeta is the anthropic-beta list values (one entry per header, each
// a comma-separated list) with beta appended: the client's betas in their
// order, blanks left out, joined by commas. added is false when values
// already name beta: the headers are then left as sent.
func withBeta(values []string, beta string) (merged string, added bool) {
	var betas []string
	for _, v := range values {
		for b := range strings.SplitSeq(v, ",") {
			switch b = strings.TrimSpace(b); b {
			case beta:
				return "", false
			case "":
			default:
				betas = append(betas, b)
			}
		}
	}
	return strings.Join(append(betas, beta), ","), true
}

// addAnthropicBeta makes the request's anthropic-beta headers name beta,
// as one header of the client's betas and beta (withBeta).
func addAnthropicBeta(h *fasthttp.RequestHeader, beta string) {
	var values []string
	for _, v := range h.PeekAll(headerAnthropicBeta) {
		values = append(values, string(v))
	}
	if merged, added := withBeta(values, beta); added {
		h.Del(headerAnthropicBeta)
		h.Set(headerAnthropicBeta, merged)
	}
}

// asksDropBlock reports whether a Messages body asks the upstream to drop
// thinking blocks whose prefix changed (it then needs betaThinkingBinding).
func asksDropBlock(body []byte) bool {
	return gjson.GetBytes(body, "thinking.block_binding.prefix_mismatch_behavior").String() == "drop_block"
}

// clientCreds are what a summary call to the conversation's own upstream
// carries from the conversation's request: the client's credentials
// (Authorization, and Anthropic's x-api-key), and the anthropic-version and
// anthropic-beta they are used under. The betas go along as sent: a beta
// only opens features, which the summary body uses none of, and some
// credentials need theirs (an OAuth token is refused without
// oauth-2025-04-20). ctxpress's own keys were removed from the request
// before (authenticate): they never reach a summary call.
type clientCreds struct {
	authorization, apiKey string
	version, beta         string
}

// credsOf reads the client's credentials off a request's headers; several
// anthropic-beta headers are joined, in order, as one list.
func credsOf(h *fasthttp.RequestHeader) clientCreds {
	return clientCreds{
		authorization: string(h.Peek(fasthttp.HeaderAuthorization)),
		apiKey:        string(h.Peek(HeaderAPIKey)),
		version:       string(h.Peek(headerAnthropicVersion)),
		beta:          string(bytes.Join(h.PeekAll(headerAnthropicBeta), []byte(","))),
	}
}

// summaryRequest is the summary call of ti, to model with a cap of
// maxTokens, the prompt left to the caller. The credential is the
// summariser's own key, else upstream_api_key, else the client's: as
// "Authorization: Bearer", or in Messages form as x-api-key. A call to the
// conversation's own upstream in Messages form also carries the client's
// anthropic-version and anthropic-beta.
func (c *compactions) summaryRequest(ti turnInput, model string, maxTokens int) compaction.SummaryRequest {
	api := c.summaryAPI(ti.api)
	r := compaction.SummaryRequest{BaseURL: c.summaryBase(), API: api, Model: model, Reasoning: c.cfg.Summarizer.reasoning(model),
		MaxTokens: maxTokens, Timeout: c.summaryTimeout()}
	key := c.cfg.Summarizer.APIKey
	if key == "" {
		key = c.apiKey
	}
	switch {
	case key != "" && api == apiMessages:
		r.APIKey = key
	case key != "":
		r.Authorization = "Bearer " + key
	default:
		r.Authorization = ti.creds.authorization
		if api == apiMessages {
			r.APIKey = ti.creds.apiKey
		}
	}
	if api == apiMessages && c.cfg.Summarizer.BaseURL == "" {
		r.AnthropicVersion, r.AnthropicBeta = ti.creds.version, ti.creds.beta
	}
	return r
}

// summaryAPI is the summary call's form for a conversation of api's
// format: the configured summariser's own, else the conversation's (its
// upstream speaks it).
func (c *compactions) summaryAPI(api *api) string {
	if c.cfg.Summarizer.BaseURL != "" {
		return c.cfg.Summarizer.API
	}
	return api.name
}

func (c *compactions) summaryBase() string {
	if c.cfg.Summarizer.BaseURL != "" {
		return c.cfg.Summarizer.BaseURL
	}
	return c.upstream
}
