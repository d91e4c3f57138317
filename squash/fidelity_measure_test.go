package squash

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The fidelity benchmark's figures, as pure functions of the traces and a
// Squasher: fidelitySamples reads a trace, newFidelityCase finds what the
// next step used, measureFidelity squashes, fidelityRows and the rest sum.
// TestCorpusFidelity (fidelity_test.go) runs them over the corpus.

// fidelitySample is one tool output of a trace, with the agent's next step
// and everything before it.
type fidelitySample struct {
	Trace  string // the trace's file name
	Index  int    // the output's place among the trace's tool outputs (each text part is one)
	Call   Call   // the call that produced the output
	Output string
	// Message is the index of the output's tool message in the trace, and
	// Part its text part's index in the content array (-1: the content is
	// a string). Request is the number of messages of the request that
	// first shows the output: every message before the agent's next step
	// (all of them when the trace ends first).
	Message, Part, Request int
	// Next is the agent's next assistant message after the output: its
	// content text and its tool calls' argument values, one per line. It is
	// "" when HasNext is false (the trace ends first).
	Next    string
	HasNext bool
	// Earlier is every message before the output, of any role: content
	// texts, tool calls' names and argument values, one per line; earlier
	// text parts of the output's own message included.
	Earlier string
}

// fidelityMessage is the part of a chat message the benchmark reads.
type fidelityMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// texts returns the message's content: a string, or the text parts of an
// array (other parts, images, carry no text).
func (m fidelityMessage) texts() ([]string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []string{s}, nil
	}
	var parts []struct{ Type, Text string }
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return nil, fmt.Errorf("%s content: %w", m.Role, err)
	}
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return out, nil
}

// textParts returns where each of texts' texts is in the content: -1
// for a string content, else the index of its part in the array.
func (m fidelityMessage) textParts() []int {
	var parts []struct{ Type string }
	if json.Unmarshal(m.Content, &parts) != nil {
		return []int{-1}
	}
	var at []int
	for k, p := range parts {
		if p.Type == "text" {
			at = append(at, k)
		}
	}
	return at
}

// stepText is what an assistant message says: its content and its tool
// calls' argument values (not their names: the agent chose the tool, it did
// not read it).
func (m fidelityMessage) stepText() string {
	texts, _ := m.texts()
	for _, tc := range m.ToolCalls {
		texts = append(texts, argumentValues(tc.Function.Arguments))
	}
	return strings.Join(texts, "\n")
}

// fidelitySamples returns the tool outputs of one trace (a chat-completions
// request body) of at least minBytes, in order.
func fidelitySamples(trace string, body []byte, minBytes int) ([]fidelitySample, error) {
	var req struct {
		Messages []fidelityMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%s: %w", trace, err)
	}
	msgs := req.Messages
	calls := map[string]Call{}
	var earlier strings.Builder
	var out []fidelitySample
	var ends []int // where each sample's Earlier ends in earlier
	index := 0
	for i, m := range msgs {
		texts, err := m.texts()
		if err != nil {
			return nil, fmt.Errorf("%s message %d: %w", trace, i, err)
		}
		parts := m.textParts()
		for k, text := range texts {
			if m.Role == "tool" {
				if len(text) >= minBytes {
					s := fidelitySample{Trace: trace, Index: index, Call: calls[m.ToolCallID], Output: text,
						Message: i, Part: parts[k], Request: len(msgs)}
					for j, next := range msgs[i+1:] {
						if next.Role == "assistant" {
							s.Next, s.HasNext = next.stepText(), true
							s.Request = i + 1 + j
							break
						}
					}
					out = append(out, s)
					ends = append(ends, earlier.Len())
				}
				index++
			}
			earlier.WriteString(text)
			earlier.WriteByte('\n')
		}
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = Call{Tool: tc.Function.Name, Args: tc.Function.Arguments}
			earlier.WriteString(tc.Function.Name + "\n" + argumentValues(tc.Function.Arguments) + "\n")
		}
	}
	all := earlier.String()
	for k := range out {
		out[k].Earlier = all[:ends[k]]
	}
	return out, nil
}

// argumentValues returns the string and number values of a tool call's
// JSON arguments, one per line, keys left out (they name the tool's
// parameters, not what the agent read); the arguments as they are when they
// are not JSON. Escapes are decoded, so "a.py\nb" gives a.py, not a.pynb.
func argumentValues(args string) string {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return args
	}
	var vals []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			vals = append(vals, v)
		case json.Number:
			vals = append(vals, v.String())
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(v[k])
			}
		}
	}
	walk(v)
	return strings.Join(vals, "\n")
}

// fidelityCase is a sample with what the benchmark decided about it once,
// whatever it is squashed with.
type fidelityCase struct {
	fidelitySample
	Producer producer
	// Used are the distinctive tokens of the next step that appear in the
	// output and nowhere in Earlier, sorted: what the step took from it.
	Used []string
}

func newFidelityCase(s fidelitySample) fidelityCase {
	c := fidelityCase{fidelitySample: s, Producer: producerOf(s.Call)}
	for _, tok := range distinctiveTokens(s.Next) {
		if containsToken(s.Output, tok) && !containsToken(s.Earlier, tok) {
			c.Used = append(c.Used, tok)
		}
	}
	return c
}

// fidelityOutcome is a case squashed.
type fidelityOutcome struct {
	*fidelityCase
	// Shape is the compressor squash picks (json, log, generic, source,
	// read), or exempt for an exempt tool.
	Shape   string
	Changed bool
	After   int      // bytes after squash
	Lost    []string // the used tokens the squashed output no longer has
	// Gone are the lost tokens no marker of the squashed output names
	// (markerNames): more than one retrieval away. ByRef counts the lost
	// ones a way back to the kept original names.
	Gone  []string
	ByRef int
	// BrokenRefs are references the squashed output's markers give that
	// return no text of the output.
	BrokenRefs []string
}

// measureFidelity squashes every case with sq, as ApplyCall does in the
// pipeline, and finds the used tokens each loses (measureForwarded).
func measureFidelity(cases []fidelityCase, sq *Squasher) []fidelityOutcome {
	return measureForwarded(cases, sq, func(c *fidelityCase) string { return sq.ApplyCall(c.Call, c.Output).Text })
}

// measureForwarded finds the used tokens each case loses in the text
// forward gives for its output: a token survives when it still appears
// (containsToken) in it; an output forwarded as it is keeps them all. Of
// the lost ones, those the text's markers name are recoverable. sq names
// the shape each output is counted under, and the reads the markers of a
// read's output refer to.
func measureForwarded(cases []fidelityCase, sq *Squasher, forward func(*fidelityCase) string) []fidelityOutcome {
	outs := make([]fidelityOutcome, len(cases))
	for i := range cases {
		c := &cases[i]
		text := forward(c)
		o := fidelityOutcome{fidelityCase: c, Shape: string(sq.Shape(c.Call, c.Output)), Changed: text != c.Output, After: len(text)}
		if _, exempt := sq.exempt[c.Call.Tool]; exempt {
			o.Shape = "exempt"
		}
		if o.Changed {
			named := markerNames(sq, c.Call, c.Output, text)
			o.BrokenRefs = named.brokenRefs
			for _, tok := range c.Used {
				if containsToken(text, tok) {
					continue
				}
				o.Lost = append(o.Lost, tok)
				switch {
				case named.containsByRef(tok):
					o.ByRef++
				case !named.contains(tok):
					o.Gone = append(o.Gone, tok)
				}
			}
		}
		outs[i] = o
	}
	return outs
}

// fidelityFigures are the sums over a group of outcomes.
type fidelityFigures struct {
	Outputs, Changed        int
	BytesBefore, BytesAfter int
	Used, Kept              int // distinctive tokens the next steps used, and of those the ones squash kept
	Losing                  int // outputs that lose at least one used token
	// Recoverable are the used tokens kept or named by a marker (one
	// retrieval away), ByRef the lost ones a way back to the kept original
	// names.
	Recoverable, ByRef int
}

func (f *fidelityFigures) add(o fidelityOutcome) {
	f.Outputs++
	if o.Changed {
		f.Changed++
	}
	f.BytesBefore += len(o.Output)
	f.BytesAfter += o.After
	f.Used += len(o.Used)
	f.Kept += len(o.Used) - len(o.Lost)
	f.Recoverable += len(o.Used) - len(o.Gone)
	f.ByRef += o.ByRef
	if len(o.Lost) > 0 {
		f.Losing++
	}
}

// SavedPct is the share of the group's bytes squash removed, unchanged
// outputs included in the denominator.
func (f fidelityFigures) SavedPct() float64 {
	if f.BytesBefore == 0 {
		return 0
	}
	return 100 * float64(f.BytesBefore-f.BytesAfter) / float64(f.BytesBefore)
}

// KeptPct is the share of used tokens squash kept; 100 when none was used.
func (f fidelityFigures) KeptPct() float64 {
	if f.Used == 0 {
		return 100
	}
	return 100 * float64(f.Kept) / float64(f.Used)
}

// RecoverablePct is the share of used tokens kept or one retrieval away;
// 100 when none was used.
func (f fidelityFigures) RecoverablePct() float64 {
	if f.Used == 0 {
		return 100
	}
	return 100 * float64(f.Recoverable) / float64(f.Used)
}

// sumFidelity adds up the outcomes that match.
func sumFidelity(outs []fidelityOutcome, match func(fidelityOutcome) bool) fidelityFigures {
	var f fidelityFigures
	for _, o := range outs {
		if match(o) {
			f.add(o)
		}
	}
	return f
}

// sizeBuckets are the output sizes the figures are split by (1 KB = 1000
// bytes, matching the size floors of the frontier): [min, max).
var sizeBuckets = []struct {
	name     string
	min, max int
}{
	{"1.5-4KB", 0, 4000}, {"4-8KB", 4000, 8000}, {"8-16KB", 8000, 16000}, {">16KB", 16000, 1 << 62},
}

func sizeBucket(n int) string {
	for _, b := range sizeBuckets {
		if n >= b.min && n < b.max {
			return b.name
		}
	}
	return ""
}

// inGroup reports whether o is counted in the row named key: "all",
// "shape=log", "producer=test", "size=4-8KB".
func (o fidelityOutcome) inGroup(key string) bool {
	switch kind, value, _ := strings.Cut(key, "="); kind {
	case "all":
		return true
	case "shape":
		return o.Shape == value
	case "producer":
		return string(o.Producer) == value
	case "size":
		return sizeBucket(len(o.Output)) == value
	}
	return false
}

// fidelityRowKeys are the rows of the figures, in order.
func fidelityRowKeys() []string {
	keys := []string{"all"}
	for _, s := range []string{"json", "log", "generic", "source", "read", "search", "exempt"} {
		keys = append(keys, "shape="+s)
	}
	for _, p := range producers {
		keys = append(keys, "producer="+string(p))
	}
	for _, b := range sizeBuckets {
		keys = append(keys, "size="+b.name)
	}
	return keys
}

// fidelityRow is one row of the figures.
type fidelityRow struct {
	Key string
	fidelityFigures
}

// fidelityRows sums outs by every row of fidelityRowKeys, leaving out the
// empty ones.
func fidelityRows(outs []fidelityOutcome) []fidelityRow {
	var rows []fidelityRow
	for _, key := range fidelityRowKeys() {
		f := sumFidelity(outs, func(o fidelityOutcome) bool { return o.inGroup(key) })
		if f.Outputs > 0 || key == "all" {
			rows = append(rows, fidelityRow{key, f})
		}
	}
	return rows
}

// fidelityFrontier measures all cases at each size floor, with the
// Squasher squasher returns for it: bytes saved against tokens kept.
func fidelityFrontier(cases []fidelityCase, floors []int, squasher func(minBytes int) *Squasher) []fidelityRow {
	rows := make([]fidelityRow, len(floors))
	for i, floor := range floors {
		outs := measureFidelity(cases, squasher(floor))
		rows[i] = fidelityRow{fmt.Sprintf("min_bytes=%d", floor), sumFidelity(outs, func(fidelityOutcome) bool { return true })}
	}
	return rows
}

// worstOffenders returns the n outcomes that lose the most used tokens
// among those in the row key ("" for all), most first; ties in trace order.
func worstOffenders(outs []fidelityOutcome, n int, key string) []fidelityOutcome {
	var worst []fidelityOutcome
	for _, o := range outs {
		if len(o.Lost) > 0 && (key == "" || o.inGroup(key)) {
			worst = append(worst, o)
		}
	}
	sort.SliceStable(worst, func(i, j int) bool {
		a, b := worst[i], worst[j]
		if len(a.Lost) != len(b.Lost) {
			return len(a.Lost) > len(b.Lost)
		}
		if a.Trace != b.Trace {
			return a.Trace < b.Trace
		}
		return a.Index < b.Index
	})
	return worst[:min(n, len(worst))]
}

// kindFigures are the used tokens of one kind (tokenKind), and where the
// lost ones were lost: by the compressor squash picked.
type kindFigures struct {
	Kind       string
	Used, Kept int
	LostBy     map[string]int // shape -> tokens lost
}

// fidelityKinds sums the used tokens by kind, in tokenKinds order.
func fidelityKinds(outs []fidelityOutcome) []kindFigures {
	byKind := map[string]*kindFigures{}
	rows := make([]kindFigures, len(tokenKinds))
	for i, k := range tokenKinds {
		rows[i] = kindFigures{Kind: k, LostBy: map[string]int{}}
		byKind[k] = &rows[i]
	}
	for _, o := range outs {
		lost := map[string]bool{}
		for _, tok := range o.Lost {
			lost[tok] = true
		}
		for _, tok := range o.Used {
			k := byKind[tokenKind(tok)]
			k.Used++
			if lost[tok] {
				k.LostBy[o.Shape]++
			} else {
				k.Kept++
			}
		}
	}
	return rows
}
