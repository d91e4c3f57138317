package messages

import (
	"testing"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// FuzzFormat: on any valid JSON, Parse and every method of the Format
// neither panic nor write invalid JSON.
func FuzzFormat(f *testing.F) {
	f.Add([]byte(every))
	for _, s := range []string{
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":7}]}],"system":[]}`,
		`{"thinking":{},"messages":[{"role":"assistant","content":[{"type":"thinking"},{"type":"text","text":1}]},3]}`,
		`{"messages":[],"system":"s"}`,
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
		if ed, ok := fm.DropMismatched(c); ok {
			check("drop mismatched", ed)
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
			if it.Content.Exists() && (it.Kind == wire.KindToolResult || it.Kind == wire.KindUser) {
				check("replace content", fm.ReplaceContent(c, i, "r"))
			}
		}
	})
}
