package compaction

import (
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/baseurl"
	"github.com/ctxpress/ctxpress/rewrite"
)

// Config says when and how conversations are compacted. The zero
// value is compaction off; zero numeric fields mean the default on them.
// The fields that decide when and how much are rewrite.Policy's (see
// policy), documented there.
type Config struct {
	Enabled bool
	// Trigger: threshold_tokens, threshold_ratio, models, default_context_window.
	Trigger rewrite.TriggerConfig
	// TargetRatio: a compaction aims below this fraction of the trigger; 0
	// means DefaultTargetRatio.
	TargetRatio float64
	// MinReclaimTokens: below this reclaim an automatic compaction does not
	// rewrite history; 0 means min(4096, 20% of the trigger).
	MinReclaimTokens int
	// KeepRecent messages stay raw; 0 means DefaultKeepRecent.
	KeepRecent int
	// KeepRecentTokens of raw tail at least; 0 means 5% of the trigger.
	KeepRecentTokens int
	// Precompact prepares the summary in the background after a turn the
	// upstream counted at PrecompactRatio (0: 0.5 in front of a hosted
	// upstream, where the cost model decides whether it pays, 0.7 in front
	// of a local one) of the trigger or more (rewrite.Policy.Precompact).
	Precompact      bool
	PrecompactRatio float64
	// SummaryPlacement is "auto" (default, also ""), "system" or "user"
	// (rewrite.Options.Placement).
	SummaryPlacement string
	Summarizer       SummarizerConfig
	// MaxHistoryMessages, with compaction off, keeps the leading system
	// messages and the last N messages; 0 is off.
	MaxHistoryMessages int
	// ConciseOutput appends a terse-writing instruction to the system prompt.
	ConciseOutput bool
	// WebhookURL receives every compaction event as a JSON POST.
	WebhookURL string
	// Ways are the ways back to an original that work in the running
	// configuration: a summary block's line on the messages it replaces
	// (kept when the engine has Deps.Originals) gives them
	// (expand.Ways.Back). The zero value is no way of the agent's own: the
	// line names the reference, for the user to expand.
	Ways expand.Ways
}

// SummarizerConfig says where summaries are written; empty fields mean the
// request's own upstream, model and Authorization.
type SummarizerConfig struct {
	BaseURL string
	// API is the form of the summary call to BaseURL: "chat" (also ""),
	// "responses", "messages" (Anthropic's, with APIKey as x-api-key) or
	// "gemini" (Google's, BaseURL its version's, e.g.
	// https://generativelanguage.googleapis.com/v1beta, with APIKey as
	// x-goog-api-key).
	// Without BaseURL the call goes to the request's own upstream in the
	// request's own format, and API must be empty.
	API    string
	Model  string
	APIKey string
	// Timeout of one summary call; 0 means DefaultSummaryTimeout.
	Timeout time.Duration
	// MaxTokens of the summary; 0 means compactor.DefaultMaxTokens(trigger):
	// min(4000, 25% of the trigger).
	MaxTokens int
	// Reasoning says, by exact model name, whether a summary call for that
	// model (the request's own or Model) takes the reasoning parameter
	// rules (max_completion_tokens, no temperature) or the classic ones,
	// over wire.RulesFor's family table. Nil means the table alone.
	Reasoning map[string]bool
}

// reasoning is the config's word on model's parameter rules, nil when it
// has none.
func (c SummarizerConfig) reasoning(model string) *bool {
	if r, ok := c.Reasoning[model]; ok {
		return &r
	}
	return nil
}

// policy is c's decision part: what rewrite plans and sizes compactions by.
func (c Config) policy() rewrite.Policy {
	return rewrite.Policy{Enabled: c.Enabled, Trigger: c.Trigger, TargetRatio: c.TargetRatio,
		MinReclaimTokens: c.MinReclaimTokens, KeepRecent: c.KeepRecent, KeepRecentTokens: c.KeepRecentTokens,
		Precompact: c.Precompact, PrecompactRatio: c.PrecompactRatio, MaxSummaryTokens: c.Summarizer.MaxTokens}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch c.SummaryPlacement {
	case "", rewrite.PlacementAuto, rewrite.PlacementSystem, rewrite.PlacementUser:
	default:
		return fmt.Errorf("summary_placement %q: want auto, system or user", c.SummaryPlacement)
	}
	for name, r := range map[string]float64{"threshold_ratio": c.Trigger.ThresholdRatio, "target_ratio": c.TargetRatio, "precompact_ratio": c.PrecompactRatio} {
		if r < 0 || r > 1 {
			return fmt.Errorf("%s %v: want a fraction between 0 and 1", name, r)
		}
	}
	if c.Summarizer.BaseURL != "" {
		if _, err := baseurl.Parse(c.Summarizer.BaseURL); err != nil {
			return fmt.Errorf("summarizer.base_url: %w", err)
		}
	}
	switch {
	case c.Summarizer.API != "" && c.Summarizer.BaseURL == "":
		return fmt.Errorf("summarizer.api %q: only with a base_url (without one, the summary call speaks the conversation's own API)", c.Summarizer.API)
	case c.Summarizer.API != "" && c.Summarizer.API != APIChat && c.Summarizer.API != APIResponses && c.Summarizer.API != APIMessages &&
		c.Summarizer.API != APIGemini:
		return fmt.Errorf("summarizer.api %q: want chat, responses, messages or gemini", c.Summarizer.API)
	}
	return nil
}
