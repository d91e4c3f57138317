package compaction

// Creds are what a summary call to the conversation's own upstream
// carries from the conversation's request: the client's credentials
// (Authorization, and Anthropic's x-api-key), and the anthropic-version and
// anthropic-beta they are used under. The betas go along as sent: a beta
// only opens features, which the summary body uses none of, and some
// credentials need theirs (an OAuth token is refused without
// oauth-2025-04-20). ctxpress's own keys were removed from the request
// before (authenticate): they never reach a summary call.
type Creds struct {
	Authorization, APIKey string
	Version, Beta         string
	// GoogleKey is a Gemini client's key: its x-goog-api-key, else its
	// key= query parameter.
	GoogleKey string
}

// summaryRequest is the summary call of ti, to model with a cap of
// maxTokens, the prompt left to the caller. The credential is the
// summariser's own key, else upstream_api_key, else the client's: as
// "Authorization: Bearer", in Messages form as x-api-key, in Gemini form
// as x-goog-api-key (the client's Authorization, an OAuth token, goes
// along when it sent no key). A call to the
// conversation's own upstream in Messages form also carries the client's
// anthropic-version and anthropic-beta.
func (c *Engine) summaryRequest(ti Input, model string, maxTokens int) SummaryRequest {
	api := c.summaryAPI(ti.API)
	r := SummaryRequest{BaseURL: c.summaryBase(ti.API), API: api, Model: model, Reasoning: c.cfg.Summarizer.reasoning(model),
		MaxTokens: maxTokens, Timeout: c.summaryTimeout()}
	key := c.cfg.Summarizer.APIKey
	if key == "" {
		key = c.routes[ti.API].APIKey
	}
	switch {
	case key != "" && (api == APIMessages || api == APIGemini):
		r.APIKey = key
	case key != "":
		r.Authorization = "Bearer " + key
	default:
		r.Authorization = ti.Creds.Authorization
		switch api {
		case APIMessages:
			r.APIKey = ti.Creds.APIKey
		case APIGemini:
			r.APIKey = ti.Creds.GoogleKey
		}
	}
	if api == APIMessages && c.cfg.Summarizer.BaseURL == "" {
		r.AnthropicVersion, r.AnthropicBeta = ti.Creds.Version, ti.Creds.Beta
	}
	return r
}

// summaryAPI is the summary call's form for a conversation of api's
// format: the configured summariser's own, else the conversation's (its
// upstream speaks it).
func (c *Engine) summaryAPI(api string) string {
	if c.cfg.Summarizer.BaseURL != "" {
		return c.cfg.Summarizer.API
	}
	return api
}

func (c *Engine) summaryBase(api string) string {
	if c.cfg.Summarizer.BaseURL != "" {
		return c.cfg.Summarizer.BaseURL
	}
	return c.routes[api].Upstream
}
