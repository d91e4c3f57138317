package gemini

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/geminitest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// fixture reads a request a real client sent (internal/geminitest's
// testdata, captured byte-exact).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "geminitest", "testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// taken fails the test when Google, as the strict fake checks it (Gemini 3:
// the current turn's signatures required), refuses body.
func taken(t *testing.T, what string, body []byte) {
	t.Helper()
	if _, err := geminitest.Check(body, geminitest.Options{Signatures: true}); err != nil {
		t.Fatalf("%s refused: %v\n%s", what, err, body)
	}
}

// The clients whose requests Google takes as sent (Gemini CLI's resumed
// session is refused by Google already: each functionResponse twice).
var takenFixtures = []string{"gemini-cli-0.61.0-turn3", "pi-0.73.1-second-ask"}

// TestRealClientsEditedAreStillTaken: every edit the core makes of a real
// client's request, all at once (the summary in systemInstruction, every
// response replaced, every model content's bound parts left out, a note
// before the first ask), gives a request Google takes; so do the summary
// call that continues it, the retrieval tool offered in it, and the
// turn continued after an answer that called it.
func TestRealClientsEditedAreStillTaken(t *testing.T) {
	f := Format{}
	for _, name := range takenFixtures {
		t.Run(name, func(t *testing.T) {
			body := fixture(t, name)
			taken(t, "as sent", body)
			c, ok := f.Parse(body)
			if !ok {
				t.Fatal("not parsed")
			}
			var eds []wire.Edit
			for m := range c.Messages {
				at := c.Messages[m].Start
				if m == 0 {
					if e, _, ok := f.PrependText(c, m, "note", count); ok {
						eds = append(eds, wire.Edit{Start: at + e.Start, End: at + e.End, Repl: e.Repl})
					}
				}
				if l, _, ok := f.LeaveOut(c, m, count); ok {
					for _, e := range l {
						eds = append(eds, wire.Edit{Start: at + e.Start, End: at + e.End, Repl: e.Repl})
					}
					continue
				}
				for i := c.Messages[m].Items.Start; i < c.Messages[m].Items.End; i++ {
					if c.Items[i].Kind == wire.KindToolResult {
						eds = append(eds, f.ReplaceContent(c, i, "[squashed]"))
					}
				}
			}
			ed, _, _ := f.AddInstructions(c, []string{"<conversation_summary>s</conversation_summary>"}, count, nil, true)
			eds = append(eds, *ed)
			sortEdits(eds)
			edited := outside(t, body, eds)
			taken(t, "edited", edited)

			call, err := SummaryBody(wire.SummaryCall{Model: "gemini-3-flash-preview", Prompt: "Summarise.", MaxTokens: 1000, History: edited}, wire.ParamRules{})
			if err != nil {
				t.Fatal(err)
			}
			taken(t, "the summary call", call)
			offered, ok := f.OfferTool(edited, expandTool)
			if !ok {
				t.Fatal("no tool offered")
			}
			r, cerr := geminitest.Check(offered, geminitest.Options{Signatures: true})
			if cerr != nil || r.Tools[len(r.Tools)-1].Name != expandTool.Name {
				t.Fatalf("offered: %v", cerr)
			}
			a, ok := f.ReadAnswer([]byte(callAnswer))
			if !ok {
				t.Fatal("answer not read")
			}
			next, err := a.Continue(offered, func(c wire.Call) bool { return c.Name == expandTool.Name },
				[]wire.CallResult{{Call: a.Calls()[0], Text: "the original"}})
			if err != nil {
				t.Fatal(err)
			}
			taken(t, "continued", next)
		})
	}
}

// TestRealClientsParse holds what the adapter reads of each real request:
// Gemini CLI pairs by id (its calls carry them), pi by order and name
// (none), every signed part bound.
func TestRealClientsParse(t *testing.T) {
	for _, name := range append(takenFixtures, "gemini-cli-0.61.0-resume") {
		t.Run(name, func(t *testing.T) {
			body := fixture(t, name)
			c, ok := Format{}.Parse(body)
			if !ok || !c.Bound || len(c.Messages) != len(gjson.GetBytes(body, "contents").Array()) {
				t.Fatalf("parsed %v bound %v", ok, c.Bound)
			}
			calls := map[string]bool{}
			for _, it := range c.Items {
				switch it.Kind {
				case wire.KindToolCall:
					calls[it.CallID] = true
					if strings.HasPrefix(name, "pi") != strings.Contains(it.CallID, "#") {
						t.Errorf("call id %q", it.CallID)
					}
				case wire.KindToolResult:
					if !calls[it.CallID] {
						t.Errorf("result %q pairs with no call", it.CallID)
					}
				}
			}
			path := filepath.Join("testdata", name+".golden")
			got := describe(c)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("parse differs from %s:\n%s", path, got)
			}
		})
	}
}

// sortEdits sorts edits by their start (Splice's order).
func sortEdits(eds []wire.Edit) {
	for i := 1; i < len(eds); i++ {
		for j := i; j > 0 && eds[j].Start < eds[j-1].Start; j-- {
			eds[j], eds[j-1] = eds[j-1], eds[j]
		}
	}
}
