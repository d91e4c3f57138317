package squash

import (
	"fmt"
	"strings"

	"sort"
	"sync"

	"github.com/ctxpress/ctxpress/expand"
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
	// ShellTools lists the tools (case-sensitive, exact) whose arguments
	// carry a shell command ("command" or "cmd": a string or an argv
	// array); their calls are checked for file reads. nil means
	// DefaultShellTools; an empty non-nil slice means none.
	ShellTools []string
	// ReadCommands lists the programs whose output is a file's content
	// (see DefaultReadCommands): a shell call whose output comes from one
	// of them is a read. nil means DefaultReadCommands; an empty non-nil
	// slice means none.
	ReadCommands []string
	// ReadMaxBytes is the largest read (a shell read, or any output shaped
	// like source code) kept whole; a larger one keeps its head and tail
	// within this many bytes around a marker that names the lines left out
	// and how to print them. 0 means DefaultReadMaxBytes (64 KiB); negative
	// turns reads off: they are squashed by shape like any output.
	ReadMaxBytes int
	// Ways, when set, means ctxpress keeps the original of every output it
	// squashes (Result.Originals), and every marker says how to get the
	// lines it leaves out back (expand.Ways.Back); nil: markers say only
	// what they leave out, and a shell command's first one how to rerun it.
	Ways *expand.Ways
}

// Call is the tool call that produced an output.
type Call struct {
	// Tool is the tool's name; "" when unknown.
	Tool string
	// Args is the call's arguments, the JSON text the model wrote
	// (`{"command": "cat -n a.go"}`); "" when unknown.
	Args string
}

// Shape is the kind of content a compressor was chosen for.
type Shape string

// Shapes returned by Detect and reported in Result.
const (
	ShapeJSON    Shape = "json"
	ShapeLog     Shape = "log"
	ShapeGeneric Shape = "generic"
	// ShapeSource is text shaped like source code, whatever the tool; it is
	// kept like a read.
	ShapeSource Shape = "source"
	// ShapeRead is the output of a shell call that prints files (cat,
	// sed -n, …): never squashed, only cut above Config.ReadMaxBytes.
	ShapeRead Shape = "read"
	// ShapeSearch is the output of a shell call that searches files (grep,
	// rg, git grep, …) up to 4 KiB: its lines are the matches asked for,
	// kept whole. A larger one is squashed by its shape.
	ShapeSearch Shape = "search"
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
	// Originals are what Text's markers point to, for the caller to keep
	// (Config.Ways): the output itself, and a text inside a JSON output
	// whose markers name its own lines. Nil when nothing was squashed or
	// originals are not kept.
	Originals []expand.Original
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
	readMax  int // < 0: reads are not kept
	exempt   map[string]struct{}
	shell    map[string]struct{}
	reads    map[string]struct{}
	count    func(string) int
	ways     *expand.Ways
}

// New returns a Squasher for cfg, filling in defaults for zero fields.
func New(cfg Config) *Squasher {
	s := &Squasher{
		minBytes: cfg.MinBytes,
		budget:   cfg.Budget,
		readMax:  cfg.ReadMaxBytes,
		count:    cfg.CountTokens,
		ways:     cfg.Ways,
		exempt:   nameSet(cfg.ExemptTools, DefaultExemptTools),
		shell:    nameSet(cfg.ShellTools, DefaultShellTools),
		reads:    nameSet(cfg.ReadCommands, DefaultReadCommands),
	}
	if s.readMax == 0 {
		s.readMax = DefaultReadMaxBytes
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
	return s
}

// nameSet returns names as a set; nil names means defaults.
func nameSet(names, defaults []string) map[string]struct{} {
	if names == nil {
		names = defaults
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return set
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

// Apply squashes the output of one call of tool whose arguments are not
// known: ApplyCall(Call{Tool: tool}, output).
func (s *Squasher) Apply(tool, output string) Result {
	return s.ApplyCall(Call{Tool: tool}, output)
}

// ApplyCall squashes the output of call. Exempt tools, outputs under the
// size floor, and outputs whose squashed form would not save at least 10%
// of tokens come back byte-identical with Squashed=false. So do reads (a
// shell call that prints files, or any output shaped like source code) up
// to Config.ReadMaxBytes; a larger read is cut to that size (cutRead), never
// squashed by shape.
func (s *Squasher) ApplyCall(c Call, output string) Result {
	r := Result{Text: output, BytesBefore: len(output), BytesAfter: len(output)}
	if _, ok := s.exempt[c.Tool]; ok || len(output) < s.minBytes {
		r.TokensBefore = s.count(output)
		r.TokensAfter = r.TokensBefore
		return r
	}
	var kept []expand.Original
	shape, out := s.compress(c, output, &kept)
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
	r.Text, r.Shape, r.Squashed, r.Originals = out, shape, true, kept
	r.BytesAfter, r.TokensAfter = len(out), after
	return r
}

// choose picks the compressor for an output of call: ShapeRead, with what
// the read says of its lines, when reads are kept and call is one; else
// the text's shape (source only while reads are kept: otherwise log or
// generic, as before there were reads).
func (s *Squasher) choose(c Call, output string) (Shape, fileRead, *textLines) {
	if s.readMax > 0 {
		if rd, ok := s.shellRead(c); ok {
			return ShapeRead, rd, nil
		}
		if len(output) <= min(s.readMax, searchMaxBytes) && s.searchCall(c) {
			return ShapeSearch, fileRead{}, nil
		}
	}
	shape, lines := detect(output)
	if shape == ShapeSource && s.readMax <= 0 {
		shape = ShapeGeneric
		if lines.isLog() {
			shape = ShapeLog
		}
	}
	return shape, fileRead{}, lines
}

// compress runs the compressor choose picks; kept collects the originals
// its markers point to (with Config.Ways).
func (s *Squasher) compress(c Call, output string, kept *[]expand.Original) (Shape, string) {
	bk := &back{rerun: s.gapHint(c), ways: s.ways, text: output, tool: c.Tool, kept: kept}
	shape, out := s.compressWith(c, output, bk)
	if shape != ShapeJSON && out != output && bk.ways != nil && bk.ref == "" {
		// Shortened with no marker that names the original (only long
		// lines cut): one line at the end names it.
		out = strings.TrimSuffix(out, "\n") + "\n[output shortened; " + bk.ways.Back(bk.refer(), expand.AllLines(output)) + "]"
		if strings.HasSuffix(output, "\n") {
			out += "\n"
		}
	}
	return shape, out
}

// compressWith is compress with what its markers say given: a text
// inside a JSON output gets the hint of the call that printed the JSON.
func (s *Squasher) compressWith(c Call, output string, hint *back) (Shape, string) {
	shape, rd, lines := s.choose(c, output)
	switch shape {
	case ShapeRead, ShapeSource:
		return shape, cutRead(output, rd, s.readMax, hint)
	case ShapeSearch:
		return shape, output
	case ShapeJSON:
		return shape, squashJSONText(output, func(text string) string { return s.squashText(text, hint.inner(text)) }, hint)
	case ShapeLog:
		return shape, squashLog(lines, s.budget, hint)
	}
	return shape, squashGeneric(lines, s.budget, hint)
}

// gapHint is what the first gap marker of c's output adds on how to get
// the omitted lines back: a shell command can be rerun narrowed; another
// tool's call is not known to be repeatable.
func (s *Squasher) gapHint(c Call) string {
	if _, ok := s.shell[c.Tool]; !ok || c.Args == "" {
		return ""
	}
	if _, _, _, ok := shellCommand(c.Args); !ok {
		return ""
	}
	return shellHint
}

// squashText squashes a text found inside a JSON output (see
// squashJSONText) as an output of its own shape, with no call: a log or
// generic text is squashed, source is kept within ReadMaxBytes, and a text
// under the size floor is kept.
func (s *Squasher) squashText(text string, hint *back) string {
	if len(text) < s.minBytes {
		return text
	}
	_, out := s.compressWith(Call{}, text, hint)
	return out
}

// Shape returns the shape ApplyCall picks for an output of call (it does
// not look at the size floor or the exempt tools).
func (s *Squasher) Shape(c Call, output string) Shape {
	shape, _, _ := s.choose(c, output)
	return shape
}

// defaultSquasher backs the package-level Apply and ApplyCall.
var defaultSquasher = sync.OnceValue(func() *Squasher { return New(Config{}) })

// Apply squashes output with the default configuration and returns the text.
func Apply(tool, output string) string {
	return defaultSquasher().Apply(tool, output).Text
}

// ApplyCall squashes the output of call with the default configuration and
// returns the text.
func ApplyCall(c Call, output string) string {
	return defaultSquasher().ApplyCall(c, output).Text
}
