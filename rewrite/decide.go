package rewrite

import (
	"strings"

	"github.com/ctxpress/ctxpress/history"
)

// knownContextWindows are the context windows, in tokens, of common model
// families, matched by the longest prefix of the (lower-cased) model name
// after any "provider/" part. The config's models: entries come first.
var knownContextWindows = []struct {
	prefix string
	window int
}{
	{"gpt-5", 272000}, // input: the 400k window includes 128k of output ("Input tokens exceed the configured limit of 272000 tokens")
	{"gpt-4.1", 1047576},
	{"gpt-4o", 128000},
	{"gpt-4-turbo", 128000},
	{"gpt-4-32k", 32768},
	{"gpt-4", 8192},
	{"gpt-3.5-turbo", 16385},
	{"o1", 200000},
	{"o3", 200000},
	{"o4", 200000},
	{"claude", 200000},
	{"gemini", 1048576},
	{"deepseek", 128000},
	{"qwen3", 131072},
	{"qwen2.5", 32768},
	{"llama-3", 131072},
	{"llama3", 131072},
	{"mistral", 32768},
	{"codestral", 262144},
	{"kimi", 131072},
	{"glm", 131072},
}

// Defaults of TriggerConfig.
const (
	DefaultThresholdRatio = 0.8
	DefaultContextWindow  = 128000
)

// TriggerConfig says when a conversation is compacted.
type TriggerConfig struct {
	// ThresholdTokens is an absolute trigger; 0 means ThresholdRatio of the
	// model's context window.
	ThresholdTokens int
	// ThresholdRatio of the context window; 0 means DefaultThresholdRatio.
	ThresholdRatio float64
	// Models overrides context windows by exact model name.
	Models map[string]int
	// DefaultContextWindow is the window of a model nobody knows; 0 means
	// the package's DefaultContextWindow.
	DefaultContextWindow int
}

// ContextWindow returns the context window of model: a Models entry, else
// the built-in table, else DefaultContextWindow.
func (c TriggerConfig) ContextWindow(model string) int {
	if w, ok := c.Models[model]; ok && w > 0 {
		return w
	}
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, window := 0, 0
	for _, k := range knownContextWindows {
		if strings.HasPrefix(name, k.prefix) && len(k.prefix) > best {
			best, window = len(k.prefix), k.window
		}
	}
	if window > 0 {
		return window
	}
	if c.DefaultContextWindow > 0 {
		return c.DefaultContextWindow
	}
	return DefaultContextWindow
}

// Trigger returns the effective-token count above which a request of model
// is compacted.
func (c TriggerConfig) Trigger(model string) int {
	if c.ThresholdTokens > 0 {
		return c.ThresholdTokens
	}
	return c.triggerOf(c.ContextWindow(model))
}

// WindowOf is the context window of a request of model on a line with
// numbers line (NumbersForModel's for model): the one its upstream
// showed by a refusal when that is smaller, else ContextWindow's.
func (c TriggerConfig) WindowOf(model string, line history.Numbers) int {
	window := c.ContextWindow(model)
	if line.Window > 0 && line.Window < window {
		return line.Window
	}
	return window
}

// triggerOf is Trigger for a model whose context window is window.
func (c TriggerConfig) triggerOf(window int) int {
	if c.ThresholdTokens > 0 {
		return c.ThresholdTokens
	}
	return c.ratioTrigger(window)
}

// ratioTrigger is ThresholdRatio (or its default) of window.
func (c TriggerConfig) ratioTrigger(window int) int {
	ratio := c.ThresholdRatio
	if ratio <= 0 {
		ratio = DefaultThresholdRatio
	}
	return int(ratio * float64(window))
}
