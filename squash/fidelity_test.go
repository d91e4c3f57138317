package squash

import (
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/bpe"
	"github.com/ctxpress/ctxpress/internal/corpustest"
)

// The squash fidelity benchmark: does squash keep what agents use next?
//
// For every tool output of at least DefaultMinBytes in the corpus traces,
// the distinctive tokens (fidelity_tokens_test.go) of the agent's next
// assistant message that appear in the output and nowhere earlier in the
// conversation are what the next step took from that output. Squashed as
// in production, an output keeps a token when the token still appears in
// it. The figures are by shape, by what produced the output
// (fidelity_producer_test.go) and by size; then the state before shell
// reads were kept beside issue 12's own figures, the frontier of size
// floors, the tokens by kind, and the worst offenders.
//
//	go test -run TestCorpusFidelity -v ./squash/
//	go test -run TestCorpusFidelity -v ./squash/ -fidelity.only=shape=log -fidelity.worst=40
//	go test -run TestCorpusFidelity -v ./squash/ -fidelity.markdown

var (
	fidelityWorst    = flag.Int("fidelity.worst", 20, "how many worst offenders TestCorpusFidelity lists")
	fidelityOnly     = flag.String("fidelity.only", "", "list the worst offenders of one row only: shape=log, producer=test, size=4-8KB")
	fidelityMarkdown = flag.Bool("fidelity.markdown", false, "print TestCorpusFidelity's tables as Markdown")
)

// fidelityFloors are the size floors of the frontier.
var fidelityFloors = []int{1500, 4000, 8000}

// productionSquasher returns the Squasher the pipeline runs with cfg's
// changes to the defaults: config.go's pipelineConfig passes the defaults
// of squash.Config (MinBytes, ExemptTools, ShellTools, ReadCommands,
// ReadMaxBytes) and counts tokens with the pipeline's o200k counter.
func productionSquasher(count func(string) int) func(Config) *Squasher {
	return func(cfg Config) *Squasher {
		cfg.CountTokens = count
		cfg.Ways = &expand.Ways{Dir: "/home/user/.cache/ctxpress/originals"} // what ctxpress on the agent's machine names
		return New(cfg)
	}
}

// corpusFidelityCases reads the corpus traces into benchmark cases, and
// says how many traces there were; it skips the test without the corpus.
func corpusFidelityCases(t testing.TB) (cases []fidelityCase, traces int) {
	t.Helper()
	all := corpustest.Traces(t)
	for _, tr := range all {
		samples, err := fidelitySamples(tr.Name, tr.Body, DefaultMinBytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			cases = append(cases, newFidelityCase(s))
		}
	}
	return cases, len(all)
}

func TestCorpusFidelity(t *testing.T) {
	if key := *fidelityOnly; key != "" && !slices.Contains(fidelityRowKeys(), key) {
		t.Fatalf("-fidelity.only=%s: want one of %s", key, strings.Join(fidelityRowKeys(), ", "))
	}
	cases, traces := corpusFidelityCases(t)
	if raceEnabled {
		// -race makes squash and tiktoken ten times slower, and the
		// benchmark has no concurrency to check: check one measure's
		// outcomes, with the cheap token estimate, and print nothing.
		checkFidelityOutcomes(t, measureFidelity(cases, New(Config{})))
		return
	}
	enc, err := bpe.New(bpe.O200K)
	if err != nil {
		t.Fatal(err)
	}
	production := productionSquasher(enc.Count)

	today := measureFidelity(cases, production(Config{}))
	checkFidelityOutcomes(t, today)
	// Issue 12's bar: squash keeps what the next steps used and still
	// pays. A change that trades one for the other below it fails here.
	all := sumFidelity(today, func(fidelityOutcome) bool { return true })
	if all.KeptPct() < 95 || all.SavedPct() < 55 {
		t.Errorf("squash keeps %.1f%% of used tokens and saves %.1f%% of bytes; want at least 95%% and 55%%", all.KeptPct(), all.SavedPct())
	}
	if again := measureFidelity(cases, production(Config{})); !reflect.DeepEqual(again, today) {
		t.Fatal("two measures of the same corpus differ")
	}
	// ReadMaxBytes < 0 squashes reads by shape, as squash did before it
	// kept them: the state issue 12 was measured in.
	before := measureFidelity(cases, production(Config{ReadMaxBytes: -1}))
	frontier := fidelityFrontier(cases, fidelityFloors, func(floor int) *Squasher {
		return production(Config{MinBytes: floor})
	})
	t.Log(fidelityReport(cases, traces, today, before, frontier))
}

// fidelityReport is the benchmark's printout: today's figures, the state
// before shell reads were kept beside issue 12's, the frontier, the tokens
// by kind and the worst offenders.
func fidelityReport(cases []fidelityCase, traces int, today, before []fidelityOutcome, frontier []fidelityRow) string {
	var b strings.Builder
	md := *fidelityMarkdown
	noNext := 0
	for _, c := range cases {
		if !c.HasNext {
			noNext++
		}
	}
	fmt.Fprintf(&b, "\n%d traces' tool outputs of %d B or more: %d (%d with no next step)\n\n",
		traces, DefaultMinBytes, len(cases), noNext)
	fmt.Fprintln(&b, "Squash today (production defaults):")
	writeFidelityRows(&b, md, fidelityRows(today))
	fmt.Fprintln(&b, "\nBefore shell reads were kept (ReadMaxBytes: -1), beside issue 12:")
	writeBeforeBesideIssue(&b, md, before)
	fmt.Fprintln(&b, "\nFrontier: today's algorithm at size floors (over all the outputs above):")
	writeFrontier(&b, md, frontier)
	b.WriteString(fidelityKindsAndWorst(today))
	return b.String()
}

// fidelityKindsAndWorst prints the used tokens of outs by kind and the
// worst offenders.
func fidelityKindsAndWorst(outs []fidelityOutcome) string {
	var b strings.Builder
	fmt.Fprintln(&b, "\nUsed tokens by kind, and the compressor that lost them:")
	writeKinds(&b, *fidelityMarkdown, fidelityKinds(outs))
	worst := worstOffenders(outs, *fidelityWorst, *fidelityOnly)
	fmt.Fprintf(&b, "\nWorst offenders%s (most used tokens lost first):\n", onlyNote(*fidelityOnly))
	writeWorst(&b, worst)
	return b.String()
}

// fidelityTables prints outs' figures by row, by kind, and the worst
// offenders.
func fidelityTables(outs []fidelityOutcome) string {
	var b strings.Builder
	writeFidelityRows(&b, *fidelityMarkdown, fidelityRows(outs))
	b.WriteString(fidelityKindsAndWorst(outs))
	return b.String()
}

func onlyNote(key string) string {
	if key == "" {
		return ""
	}
	return " in " + key
}

// checkFidelityOutcomes checks what must hold of every outcome, so a
// broken measure fails instead of printing wrong figures.
func checkFidelityOutcomes(t *testing.T, outs []fidelityOutcome) {
	t.Helper()
	for _, o := range outs {
		switch {
		case o.After > len(o.Output):
			t.Errorf("%s #%d: squashed to %d bytes from %d", o.Trace, o.Index, o.After, len(o.Output))
		case !o.Changed && len(o.Lost) > 0:
			t.Errorf("%s #%d: unchanged output lost %q", o.Trace, o.Index, o.Lost)
		case len(o.Lost) > len(o.Used):
			t.Errorf("%s #%d: lost %d of %d used tokens", o.Trace, o.Index, len(o.Lost), len(o.Used))
		case len(o.Gone)+o.ByRef > len(o.Lost):
			t.Errorf("%s #%d: %d gone and %d by reference of %d lost", o.Trace, o.Index, len(o.Gone), o.ByRef, len(o.Lost))
		case len(o.BrokenRefs) > 0:
			// A marker that offers a retrieval returning something else
			// sends the agent after what is not there.
			t.Errorf("%s #%d: markers give references %q that return no text of the output", o.Trace, o.Index, o.BrokenRefs)
		}
		next := distinctiveTokens(o.Next)
		for _, tok := range o.Used {
			if !containsToken(o.Output, tok) || containsToken(o.Earlier, tok) || !slices.Contains(next, tok) {
				t.Errorf("%s #%d: used token %q is not a token of the next step new in the output", o.Trace, o.Index, tok)
			}
		}
	}
}

// fidelityTrace is a small trace for the unit tests: a read-only call with
// two outputs (the second in text parts), a next step, and an output the
// trace ends on.
const fidelityTrace = `{"model": "m", "messages": [
 {"role": "system", "content": "You may call run_tests."},
 {"role": "user", "content": "Fix tests/test_dates.py"},
 {"role": "assistant", "content": "Running them.", "tool_calls": [
  {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"pytest tests/test_dates.py\"}"}},
  {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"cat dates.py\"}"}}]},
 {"role": "tool", "tool_call_id": "c1", "content": "FAILED tests/test_dates.py::TestParseDate - parse_iso_week at dates.py:1204"},
 {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "def parse_iso_week(s):"}, {"type": "image_url"}, {"type": "text", "text": "    return TestParseDate"}]},
 {"role": "user", "content": "go on"},
 {"role": "assistant", "content": "parse_iso_week at dates.py:1204 breaks TestParseDate in tests/test_dates.py", "tool_calls": [
  {"id": "c3", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"sed -n '1190,1210p' dates.py\", \"n\": 1205}"}}]},
 {"role": "tool", "tool_call_id": "c3", "content": "1204: last_output"}
]}`

func TestFidelitySamples(t *testing.T) {
	samples, err := fidelitySamples("t.json", []byte(fidelityTrace), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4 {
		t.Fatalf("got %d samples, want 4 (two outputs, one of two text parts, one last)", len(samples))
	}
	next := "parse_iso_week at dates.py:1204 breaks TestParseDate in tests/test_dates.py\nsed -n '1190,1210p' dates.py\n1205"
	for i, s := range samples[:3] {
		if !s.HasNext || s.Next != next {
			t.Errorf("sample %d: next %q (%v), want the next assistant message past the user's, with argument values", i, s.Next, s.HasNext)
		}
		if s.Index != i {
			t.Errorf("sample %d: index %d", i, s.Index)
		}
	}
	if s := samples[3]; s.HasNext || s.Next != "" || s.Output != "1204: last_output" {
		t.Errorf("the last output: %+v, want no next step", s)
	}
	if c := samples[1].Call; c.Tool != "bash" || c.Args != `{"command": "cat dates.py"}` {
		t.Errorf("second output's call: %+v", c)
	}
	if e := samples[0].Earlier; !strings.Contains(e, "run_tests") || !strings.Contains(e, "pytest tests/test_dates.py") || strings.Contains(e, "parse_iso_week") {
		t.Errorf("first output's earlier text: %q, want the system prompt and the call's arguments, not the output", e)
	}
	if e := samples[2].Earlier; !strings.HasSuffix(e, "def parse_iso_week(s):\n") {
		t.Errorf("a second text part's earlier text ends %q, want the first part", e[max(0, len(e)-40):])
	}
	used := newFidelityCase(samples[0]).Used
	if want := []string{"TestParseDate", "dates.py:1204", "parse_iso_week"}; !reflect.DeepEqual(used, want) {
		t.Errorf("used tokens of the first output: %q, want %q (not tests/test_dates.py: the user named it)", used, want)
	}
	if used := newFidelityCase(samples[1]).Used; len(used) != 0 {
		t.Errorf("used tokens of the second output: %q, want none (all were in the first)", used)
	}
}

// fidelityGenericOutput is a 4 KB generic text whose middle squash drops
// and whose head it keeps.
func fidelityGenericOutput() string {
	var b strings.Builder
	b.WriteString("head_token_kept at the top\n")
	for i := range 120 {
		fmt.Fprintf(&b, "plain line %d of some output text\n", i)
		if i == 60 {
			b.WriteString("middle_token_lost in the middle\n")
		}
	}
	return b.String()
}

func TestMeasureFidelity(t *testing.T) {
	out := fidelityGenericOutput()
	next := "head_token_kept and middle_token_lost"
	cases := []fidelityCase{
		newFidelityCase(fidelitySample{Trace: "a", Call: Call{Tool: "bash", Args: `{"command": "python run.py"}`}, Output: out, Next: next, HasNext: true}),
		newFidelityCase(fidelitySample{Trace: "b", Call: Call{Tool: "read_file"}, Output: out, Next: next, HasNext: true}),
		newFidelityCase(fidelitySample{Trace: "c", Call: Call{Tool: "bash", Args: `{"command": "python run.py"}`}, Output: out, Next: next, Earlier: "middle_token_lost"}),
	}
	outs := measureFidelity(cases, New(Config{}))
	if o := outs[0]; !o.Changed || o.Shape != "generic" || !reflect.DeepEqual(o.Lost, []string{"middle_token_lost"}) || len(o.Gone) != 0 {
		t.Errorf("squashed generic output: changed %v shape %q lost %q gone %q, want the middle token lost, in the lines a marker names", o.Changed, o.Shape, o.Lost, o.Gone)
	}
	if o := outs[1]; o.Changed || o.Shape != "exempt" || len(o.Lost) != 0 || o.After != len(out) {
		t.Errorf("exempt tool's output: %+v, want unchanged, all kept", o)
	}
	if o := outs[2]; len(o.Used) != 1 || len(o.Lost) != 0 {
		t.Errorf("a token named earlier is not used: used %q lost %q", o.Used, o.Lost)
	}
	all := fidelityRows(outs)[0]
	want := fidelityFigures{Outputs: 3, Changed: 2, BytesBefore: 3 * len(out), BytesAfter: len(out) + 2*outs[0].After,
		Used: 5, Kept: 4, Losing: 1, Recoverable: 5}
	if all.Key != "all" || all.fidelityFigures != want {
		t.Errorf("row all: %+v, want %+v", all, want)
	}
	if got := sumFidelity(outs, func(o fidelityOutcome) bool { return o.inGroup("producer=other") }); got.Outputs != 2 {
		t.Errorf("producer=other has %d outputs, want the two python runs", got.Outputs)
	}
	if got := sumFidelity(outs, func(o fidelityOutcome) bool { return o.inGroup("size=4-8KB") }); got.Outputs != 3 {
		t.Errorf("size=4-8KB has %d outputs, want 3 (%d bytes each)", got.Outputs, len(out))
	}
	if w := worstOffenders(outs, 5, ""); len(w) != 1 || w[0].Trace != "a" {
		t.Errorf("worst offenders: %d, want the one that lost a token", len(w))
	}
	frontier := fidelityFrontier(cases, []int{1500, 8000}, func(floor int) *Squasher { return New(Config{MinBytes: floor}) })
	if f := frontier[1]; f.Changed != 0 || f.Kept != f.Used || f.SavedPct() != 0 {
		t.Errorf("a floor above every output changes nothing: %+v", f)
	}
	kinds := fidelityKinds(outs)
	if k := kinds[0]; k.Kind != "identifier" || k.Used != 5 || k.Kept != 4 || k.LostBy["generic"] != 1 {
		t.Errorf("identifiers: %+v, want 5 used, 1 lost by generic", k)
	}
}
