package rewrite

import (
	"strings"

	"github.com/ctxpress/ctxpress/history"
)

// Prices are what a model's tokens cost, in dollars per million tokens.
// CachedInput is a prompt token read from the provider's prompt cache,
// CacheWrite one written to it (Anthropic bills it at 1.25x Input; OpenAI
// and llama.cpp write for free, and then it equals Input).
type Prices struct {
	Input       float64 `yaml:"input" json:"input"`
	CachedInput float64 `yaml:"cached_input" json:"cached_input"`
	CacheWrite  float64 `yaml:"cache_write" json:"cache_write"`
	Output      float64 `yaml:"output" json:"output"`
}

// LocalPrices price a local server (llama.cpp, LM Studio, Ollama) by what
// it spends, in prefill tokens: a prompt token is one; a cached one skips
// its prefill, but every token decoded after it attends over it (llama.cpp
// decodes about a quarter slower at 16k of context), about 0.03 over a
// turn's answer; an output token, decoded one at a time, costs what
// prefilling ten does.
var LocalPrices = Prices{Input: 1, CachedInput: 0.03, CacheWrite: 1, Output: 10}

// DefaultPrices price a model nobody knows as the common case of hosted
// models: a cached token at a tenth, output at eight times input.
var DefaultPrices = Prices{Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10}

// knownPrices are published list prices (USD per million tokens, as of
// December 2026) of common model families, matched like
// knownContextWindows: the longest prefix of the lower-cased name after
// any "provider/" part. Anthropic's cache write is the 5-minute one, the
// one Claude Code's markers ask for; a Pro model's input is never served
// from the cache.
var knownPrices = []struct {
	prefix string
	prices Prices
}{
	{"gpt-5.5-pro", Prices{30, 30, 30, 180}},
	{"gpt-5.5", Prices{5, 0.50, 5, 30}},
	{"gpt-5.4-pro", Prices{30, 30, 30, 180}},
	{"gpt-5.4-nano", Prices{0.20, 0.02, 0.20, 1.25}},
	{"gpt-5.4-mini", Prices{0.75, 0.075, 0.75, 4.50}},
	{"gpt-5.4", Prices{2.50, 0.25, 2.50, 15}},
	{"gpt-5.3-codex", Prices{1.75, 0.175, 1.75, 14}},
	{"gpt-5.2", Prices{1.75, 0.175, 1.75, 14}},
	{"gpt-5.1-codex-mini", Prices{0.25, 0.025, 0.25, 2}},
	{"gpt-5-nano", Prices{0.05, 0.005, 0.05, 0.40}},
	{"gpt-5-mini", Prices{0.25, 0.025, 0.25, 2}},
	{"gpt-5", Prices{1.25, 0.125, 1.25, 10}},
	{"gpt-4.1-nano", Prices{0.10, 0.025, 0.10, 0.40}},
	{"gpt-4.1-mini", Prices{0.40, 0.10, 0.40, 1.60}},
	{"gpt-4.1", Prices{2, 0.50, 2, 8}},
	{"gpt-4o-mini", Prices{0.15, 0.075, 0.15, 0.60}},
	{"gpt-4o", Prices{2.50, 1.25, 2.50, 10}},
	{"o4-mini", Prices{1.10, 0.275, 1.10, 4.40}},
	{"o3", Prices{2, 0.50, 2, 8}},
	{"o1", Prices{15, 7.50, 15, 60}},
	{"claude-fable-5-1", Prices{10, 0.25, 12.50, 50}},
	{"claude-fable-5", Prices{10, 1, 12.50, 50}},
	{"claude-opus-5-5", Prices{4, 0.20, 5, 20}},
	{"claude-opus-5", Prices{5, 0.50, 6.25, 25}},
	{"claude-opus-4-8", Prices{5, 0.50, 6.25, 25}},
	{"claude-opus-4-7", Prices{5, 0.50, 6.25, 25}},
	{"claude-opus-4-6", Prices{5, 0.50, 6.25, 25}},
	{"claude-opus-4-5", Prices{5, 0.50, 6.25, 25}},
	{"claude-sonnet-5-5", Prices{2, 0.10, 2.50, 10}},
	{"claude-sonnet-5", Prices{2, 0.20, 2.50, 10}},
	{"claude-haiku-5-5", Prices{0.10, 0.01, 0.125, 0.50}}, // prompts up to 100k tokens; longer ones cost five times as much
	{"claude-opus", Prices{15, 1.50, 18.75, 75}},
	{"claude-sonnet", Prices{3, 0.30, 3.75, 15}},
	{"claude-3-7-sonnet", Prices{3, 0.30, 3.75, 15}},
	{"claude-3-5-sonnet", Prices{3, 0.30, 3.75, 15}},
	{"claude-haiku-4-5", Prices{1, 0.10, 1.25, 5}},
	{"claude-3-5-haiku", Prices{0.80, 0.08, 1, 4}},
	{"gemini-3-pro", Prices{2, 0.20, 2, 12}},
	{"gemini-3-flash", Prices{0.50, 0.05, 0.50, 3}},
	{"gemini-2.5-pro", Prices{1.25, 0.125, 1.25, 10}},
	{"gemini-2.5-flash", Prices{0.30, 0.03, 0.30, 2.50}},
	{"deepseek", Prices{0.28, 0.028, 0.28, 0.42}},
}

// CostConfig is where a model's prices come from.
type CostConfig struct {
	// Models overrides prices by exact model name (the config's models:
	// entries that give any price).
	Models map[string]Prices
	// Local: the upstream is a local server; a model without a Models entry
	// is priced at LocalPrices, not at a hosted provider's list price.
	Local bool
}

// PricesFor returns model's prices: a Models entry, else LocalPrices for a
// local upstream, else the built-in table, else DefaultPrices.
func (c CostConfig) PricesFor(model string) Prices {
	if p, ok := c.Models[model]; ok {
		return p.complete()
	}
	if c.Local {
		return LocalPrices
	}
	if p, ok := ListPrices(model); ok {
		return p
	}
	return DefaultPrices
}

// ListPrices returns model's prices from the built-in table of list
// prices; false when the table does not know it.
func ListPrices(model string) (Prices, bool) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, found := -1, Prices{}
	for _, k := range knownPrices {
		if strings.HasPrefix(name, k.prefix) && len(k.prefix) > best {
			best, found = len(k.prefix), k.prices
		}
	}
	return found, best >= 0
}

// complete fills what an override left out: a cache write costs what an
// input token does unless it says otherwise.
func (p Prices) complete() Prices {
	if p.CacheWrite == 0 {
		p.CacheWrite = p.Input
	}
	return p
}

// Usage is one upstream call's tokens as a bill counts them: Input is
// every prompt token, Cached and CacheWrite the parts of it read from and
// written to the prompt cache.
type Usage struct {
	Input, Cached, CacheWrite, Output int
}

// Cost is what u costs at p, in dollars.
func (p Prices) Cost(u Usage) float64 {
	fresh := max(u.Input-u.Cached-u.CacheWrite, 0)
	return (float64(fresh)*p.Input + float64(u.Cached)*p.CachedInput +
		float64(u.CacheWrite)*p.CacheWrite + float64(u.Output)*p.Output) / 1e6
}

// PrefixChange is a step's proposal to rewrite part of what was already
// sent (dedup of an earlier result, pruning, a history cut, a compaction).
type PrefixChange struct {
	// Removed is how many tokens the change takes out of this request and of
	// every later one.
	Removed int
	// Rebuilt is how many tokens the provider has cached now and would be
	// sent uncached once because of the change: from its first changed byte
	// to the end of what was last sent, as the change leaves them.
	Rebuilt int
	// Extra is what the change itself costs, in dollars (a summary call);
	// 0 for an edit.
	Extra float64
}

// Economics is what the cost model knows of a conversation when a step
// asks it.
type Economics struct {
	Prices Prices
	// Uncached: the upstream is not caching this conversation's prefix
	// (none reported after a prompt large enough to cache): a removed token
	// saves its full price and a rewrite rebuilds nothing.
	Uncached bool
	// TurnsAhead is how many requests are expected from this one on, this
	// one included (ExpectedTurnsAhead).
	TurnsAhead int
	// TurnsSoFar is how many requests the conversation has had, and
	// Growth how many tokens a request adds to the one before
	// (history.Numbers.Growth; 0: unknown).
	TurnsSoFar, Growth int
}

// ExpectedTurnsAhead is how many more requests a conversation that has had
// turnsSoFar is expected to send, this one included: half as many again,
// at least two (one that has started is rarely over in one more). Half, not all (a run's expected remaining life is about
// its age): a rewrite taken on a too-hopeful guess costs more than the
// one it waits for, and a run's last turns are where it stops.
func ExpectedTurnsAhead(turnsSoFar int) int {
	return max(2, turnsSoFar/2)
}

// Saving is what c saves (positive) or costs (negative) over the turns
// expected, in dollars: each removed token is paid as a cached read on
// every turn ahead (its full price when the upstream does not cache),
// against the rebuilt tokens paid as new writes once instead of reads,
// and the change's own cost.
func (e Economics) Saving(c PrefixChange) float64 {
	perToken, rebuild := e.Prices.CachedInput, e.Prices.CacheWrite-e.Prices.CachedInput
	if e.Uncached {
		perToken, rebuild = e.Prices.Input, 0
	}
	saved := float64(c.Removed) * perToken * float64(max(e.TurnsAhead, 1))
	return (saved-float64(c.Rebuilt)*rebuild)/1e6 - c.Extra
}

// Pays reports whether c saves more than it costs over the turns expected.
func (e Economics) Pays(c PrefixChange) bool { return e.Saving(c) > 0 }

// minCacheablePrompt is the smallest prompt a provider caches (OpenAI:
// 1024 tokens), with room for the count's error: a smaller prompt read as
// uncached says nothing about the cache.
const minCacheablePrompt = 2048

// uncachedEvidence is how many large prompts in a row reported nothing
// cached before a conversation is taken as not cached.
const uncachedEvidence = 3

// nextCacheEvidence returns ev after a turn that reported u.
func nextCacheEvidence(ev history.CacheEvidence, u Usage) history.CacheEvidence {
	switch {
	case u.Cached > 0 || u.CacheWrite > 0:
		return history.CacheEvidence{Seen: true}
	case !ev.Seen && u.Input >= minCacheablePrompt:
		ev.Uncached++
	}
	return ev
}

// notCaching reports whether ev shows an upstream that does not cache:
// uncachedEvidence large prompts and never a cached token. Until then it
// is assumed to cache: the cautious guess, under which a rewrite must pay
// for the cache it breaks.
func notCaching(ev history.CacheEvidence) bool { return !ev.Seen && ev.Uncached >= uncachedEvidence }

// EconomicsFor is the cost model's view of a conversation priced at p that
// has had turnsSoFar requests, its cache as ev says.
func EconomicsFor(p Prices, turnsSoFar int, ev history.CacheEvidence) Economics {
	return Economics{Prices: p, TurnsAhead: ExpectedTurnsAhead(turnsSoFar), TurnsSoFar: turnsSoFar, Uncached: notCaching(ev)}
}
