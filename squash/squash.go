package squash

import (
	"fmt"
	"sort"
)

// Default values used when a Config field is left at its zero value.
const (
	DefaultMinBytes = 1500
	DefaultBudget   = 3000
)

// DefaultExemptTools are the read-type tools whose output is never squashed:
// agents edit files by exact match against what these returned, so a single
// changed byte would make the next edit fail.
var DefaultExemptTools = []string{
	"read", "read_file", "Read", "ReadFile", "readFile", "view", "view_file",
	"cat", "open", "goto", "scroll_up", "scroll_down", "str_replace_editor",
	"NotebookRead", "get_file_contents", "fs_read",
}

// Config tunes a Squasher. Zero values mean defaults.
type Config struct {
	// MinBytes is the size floor: outputs shorter than this many bytes come
	// back byte-identical. 0 means DefaultMinBytes (1500).
	MinBytes int
	// ExemptTools lists tool names (case-sensitive, exact) whose output is
	// returned byte-identical. nil means DefaultExemptTools; an empty non-nil
	// slice exempts nothing.
	ExemptTools []string
	// Budget is the target output size in bytes for generic text, and for
	// the optional part of a log (frames, head and tail lines, context),
	// which always gets at least Budget/2 beyond the required log lines
	// (errors, failing tests, summaries, warnings); those are kept past it.
	// 0 means DefaultBudget (3000).
	Budget int
	// CountTokens counts tokens for the "saves at least 10% of tokens" rule
	// and for Result stats. nil means ApproxTokens, a cheap cl100k-like
	// estimate (see its doc).
	CountTokens func(string) int
}

// Shape is the kind of content a compressor was chosen for.
type Shape string

// Shapes returned by Detect and reported in Result.
const (
	ShapeJSON    Shape = "json"
	ShapeLog     Shape = "log"
	ShapeGeneric Shape = "generic"
)

// Result is the outcome of squashing one tool output.
type Result struct {
	// Text is the squashed output, or the input byte-exact when !Squashed.
	Text string
	// Shape is the compressor used; "" when the output was left untouched.
	Shape Shape
	// Squashed reports whether Text differs from the input.
	Squashed bool

	BytesBefore, BytesAfter   int
	TokensBefore, TokensAfter int
}

// StatsLine formats r as one line, e.g.
// "shape=log bytes 287848->9123 tokens 71000->2300 (-96.8%)".
// An untouched result prints shape=none.
func (r Result) StatsLine() string {
	shape := string(r.Shape)
	if shape == "" {
		shape = "none"
	}
	saved := 0.0
	if r.TokensBefore > 0 {
		saved = 100 * float64(r.TokensBefore-r.TokensAfter) / float64(r.TokensBefore)
	}
	return fmt.Sprintf("shape=%s bytes %d->%d tokens %d->%d (-%.1f%%)",
		shape, r.BytesBefore, r.BytesAfter, r.TokensBefore, r.TokensAfter, saved)
}

// Squasher compresses tool outputs. It is immutable after New and safe for
// concurrent use.
type Squasher struct {
	minBytes int
	budget   int
	exempt   map[string]struct{}
	count    func(string) int
}

// New returns a Squasher for cfg, filling in defaults for zero fields.
func New(cfg Config) *Squasher {
	s := &Squasher{
		minBytes: cfg.MinBytes,
		budget:   cfg.Budget,
		count:    cfg.CountTokens,
		exempt:   map[string]struct{}{},
	}
	if s.minBytes <= 0 {
		s.minBytes = DefaultMinBytes
	}
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	if s.count == nil {
		s.count = ApproxTokens
	}
	names := cfg.ExemptTools
	if names == nil {
		names = DefaultExemptTools
	}
	for _, n := range names {
		s.exempt[n] = struct{}{}
	}
	return s
}

// ExemptTools returns the exempt tool names, sorted.
func (s *Squasher) ExemptTools() []string {
	out := make([]string, 0, len(s.exempt))
	for n := range s.exempt {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Apply squashes the output of one call of tool. Exempt tools, outputs under
// the size floor, and outputs whose squashed form would not save at least
// 10% of tokens come back byte-identical with Squashed=false.
func (s *Squasher) Apply(tool, output string) Result {
	r := Result{Text: output, BytesBefore: len(output), BytesAfter: len(output)}
	if _, ok := s.exempt[tool]; ok || len(output) < s.minBytes {
		r.TokensBefore = s.count(output)
		r.TokensAfter = r.TokensBefore
		return r
	}
	shape, lines := detect(output)
	var out string
	switch shape {
	case ShapeJSON:
		out = squashJSON(output)
	case ShapeLog:
		out = squashLog(lines, s.budget)
	default:
		out = squashGeneric(lines, s.budget)
	}
	r.TokensBefore = s.count(output)
	if len(out) >= len(output) {
		r.TokensAfter = r.TokensBefore
		return r
	}
	after := s.count(out)
	// Keep the original unless at least 10% of tokens are saved: a smaller
	// gain is not worth the information lost.
	if after*10 > r.TokensBefore*9 {
		r.TokensAfter = r.TokensBefore
		return r
	}
	r.Text, r.Shape, r.Squashed = out, shape, true
	r.BytesAfter, r.TokensAfter = len(out), after
	return r
}

// Apply squashes output with the default configuration and returns the text.
func Apply(tool, output string) string {
	return New(Config{}).Apply(tool, output).Text
}
