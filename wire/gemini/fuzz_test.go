package gemini

import (
	"testing"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// FuzzParseFormat: on any valid JSON, Parse and every method of the Format
// neither panic nor write invalid JSON, and no edit but LeaveOut's changes
// a signed part.
func FuzzParseFormat(f *testing.F) {
	f.Add([]byte(every))
	f.Add([]byte(signedLoop))
	for _, s := range []string{
		`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"t","response":7}}]}],"systemInstruction":[]}`,
		`{"contents":[{"role":"model","parts":[{"text":1,"thought":true,"thoughtSignature":2},3]},4]}`,
		`{"contents":[],"systemInstruction":{"parts":7}}`,
		`{"contents":[{"parts":[{"functionResponse":{"response":{"a":"b","c":"d"}}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !jsonvalid.Valid(body) {
			return
		}
		fm := Format{}
		c, ok := fm.Parse(body)
		if !ok {
			return
		}
		check := func(what string, eds ...wire.Edit) {
			if out := wire.Splice(body, eds); !jsonvalid.Valid(out) {
				t.Fatalf("%s: invalid JSON %s", what, out)
			}
		}
		if ed, _, _ := fm.AddInstructions(c, []string{"x"}, count, nil, true); ed != nil {
			check("add instructions", *ed)
		}
		for m := range c.Messages {
			fm.Overhead(c, m, count)
			fm.Digest(c, m)
			at := c.Messages[m].Start
			if e, _, ok := fm.PrependText(c, m, "p", count); ok {
				check("prepend", wire.Edit{Start: at + e.Start, End: at + e.End, Repl: e.Repl})
			}
			if eds, _, ok := fm.LeaveOut(c, m, count); ok {
				for i := range eds {
					eds[i].Start, eds[i].End = eds[i].Start+at, eds[i].End+at
				}
				check("leave out", eds...)
			}
		}
		for i, it := range c.Items {
			fm.Parts(c, i, count)
			fm.Text(c, i)
			if it.Kind == wire.KindToolCall {
				fm.Arguments(c, i)
				fm.CanonicalArguments(c, i)
			}
			if it.Content.Exists() {
				e := fm.ReplaceContent(c, i, "r")
				check("replace content", e)
				if it.Bound && (e.Start != e.End || e.Repl != nil) {
					t.Fatalf("a bound part edited: %s", it.Span.Of(body))
				}
			}
		}
		if out, ok := fm.OfferTool(body, expandTool); ok && !jsonvalid.Valid(out) {
			t.Fatalf("offer tool: invalid JSON %s", out)
		}
		if out, err := SummaryBody(wire.SummaryCall{Prompt: "p", MaxTokens: 10, History: body}, wire.ParamRules{}); err == nil && !jsonvalid.Valid(out) {
			t.Fatalf("summary body: invalid JSON %s", out)
		}
	})
}

// FuzzStreamWatch: any bytes, cut anywhere, never panic the watcher, and
// a stream read whole or in two reads says the same.
func FuzzStreamWatch(f *testing.F) {
	f.Add([]byte(sseStream), 10)
	f.Add([]byte(arrayStream), 100)
	f.Fuzz(func(t *testing.T, stream []byte, cut int) {
		if cut < 0 || cut > len(stream) {
			return
		}
		var whole, split StreamWatch
		whole.Observe(stream)
		split.Observe(stream[:cut])
		split.Observe(stream[cut:])
		if whole.Usage() != split.Usage() || whole.Completed() != split.Completed() {
			t.Fatalf("whole %+v, split at %d %+v", whole.Usage(), cut, split.Usage())
		}
		Format{}.ReadAnswer(stream)
	})
}
