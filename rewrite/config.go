package rewrite

import (
	"fmt"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
)

// Config configures a Pipeline. Format is required; the other fields'
// zero values are no squashing, no dedup, DefaultCacheBytes of cache and
// default identification.
type Config struct {
	// Format is the wire adapter Rewrite and RewriteWith read bodies
	// with (chat.Format for chat completions); required: the core prefers
	// no format, and a Pipeline without one would understand no body.
	// RewriteParsed uses the adapter its Parsed was made with.
	Format wire.Format
	// Squash configures the squash of tool outputs; nil disables it
	// (unless Squasher is set). The pipeline builds its squash.Squasher
	// from it, counting tokens with its own counter (o200k_base, cached)
	// when CountTokens is nil, so squash's "saves at least 10%" rule and
	// its stats count as the rest of the pipeline does.
	Squash *squash.Config
	// Squasher, when not nil, is used instead of one built from Squash (a
	// stand-in in tests, or a squasher built elsewhere).
	Squasher Squasher
	// Expand, when set, means ctxpress keeps the original of everything
	// squash, prune and dedup replace (Result.Originals), and every marker
	// says the ways back it names; nil: markers as without originals.
	Expand *expand.Ways
	// Dedup configures the replacement of superseded tool results.
	Dedup DedupConfig
	// Prune configures the one-line pruning of old tool results.
	Prune PruneConfig
	// CacheBytes bounds the memory of the squash, token and per-message
	// caches together. 0 means DefaultCacheBytes; negative disables caching.
	CacheBytes int64
	// Identify configures Pipeline.Identify.
	Identify IdentifyConfig
}

// Validate reports a config the Pipeline cannot follow.
func (c Config) Validate() error {
	if c.Format == nil {
		return fmt.Errorf("rewrite: Config.Format is nil (the wire adapter bodies are read with, e.g. chat.Format{}): %w", ErrBadConfig)
	}
	if err := c.Identify.Validate(); err != nil {
		return err
	}
	return c.Dedup.Validate()
}

// DefaultMinDedupTokens is DedupConfig.MinTokens when it is 0.
const DefaultMinDedupTokens = 1000

// DedupConfig configures dedup.
type DedupConfig struct {
	// Enabled turns dedup on. The zero value is off; see DefaultDedupConfig.
	Enabled bool
	// ReadOnlyTools are the tools whose earlier result is replaced when a
	// later call has the same arguments. nil means DefaultReadOnlyTools; an
	// empty, non-nil slice means none (only byte-identical results are then
	// collapsed). Names are case-sensitive. A call of a shell tool
	// (squash's ShellTools) whose command only looks (cat, sed -n, rg,
	// ls, git diff, …: squash.Squasher.ReadOnlyCall) counts as read-only
	// too when its output comes in run details (codex's exec tools, whose
	// outputs are compared by what the command printed).
	ReadOnlyTools []string
	// MinTokens is the least the dedups a request adds over the previous
	// forwarded request's (Options.PrevDedups) must save together for any
	// of them to be done: a dedup rewrites a message the provider has
	// already cached. 0 means DefaultMinDedupTokens; negative means no
	// minimum.
	MinTokens int
}

// DefaultDedupConfig returns dedup on, with the default tools and minimum.
func DefaultDedupConfig() DedupConfig {
	return DedupConfig{Enabled: true, ReadOnlyTools: DefaultReadOnlyTools(), MinTokens: DefaultMinDedupTokens}
}

// DefaultReadOnlyTools returns the read-only tool names of common agents
// (Claude Code, opencode, Gemini CLI / qwen-code, OpenHands-style and
// generic): calling one twice with the same arguments reads the same thing,
// so the later result makes the earlier one redundant. Stateful viewers
// whose output depends on an editor cursor (SWE-agent's open, goto,
// scroll_down, scroll_up) are deliberately absent.
func DefaultReadOnlyTools() []string {
	return []string{
		"read", "read_file", "Read", "view", "read_many_files",
		"grep", "Grep", "search", "rg", "search_file_content",
		"glob", "Glob", "find", "list_dir", "list_directory", "ls", "LS", "list",
		"web_fetch", "fetch", "WebFetch", "webfetch",
	}
}

// Validate reports a config dedup cannot follow.
func (c DedupConfig) Validate() error {
	for _, t := range c.ReadOnlyTools {
		if t == "" {
			return fmt.Errorf("rewrite: empty read-only tool name: %w", ErrBadConfig)
		}
	}
	return nil
}

// minTokens returns the effective minimum saving.
func (c DedupConfig) minTokens() int {
	switch {
	case c.MinTokens == 0:
		return DefaultMinDedupTokens
	case c.MinTokens < 0:
		return 0
	}
	return c.MinTokens
}

// readOnlySet returns the read-only tools as a set.
func (c DedupConfig) readOnlySet() map[string]bool {
	names := c.ReadOnlyTools
	if names == nil {
		names = DefaultReadOnlyTools()
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}
