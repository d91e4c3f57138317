package gemini

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// describe renders a parse for a golden file: the conversation's fields,
// then one line per content and one per part, texts cut to 60 bytes.
func describe(c *wire.Conversation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %q lead %d system-slot %v bound %v counted %d\n", c.Model, c.Lead, c.SystemSlot, c.Bound, len(c.Counted))
	kinds := map[wire.Kind]string{wire.KindOpaque: "opaque", wire.KindInstruction: "instruction", wire.KindUser: "user",
		wire.KindAssistant: "assistant", wire.KindToolCall: "call", wire.KindToolResult: "result"}
	f := Format{}
	for m, msg := range c.Messages {
		fmt.Fprintf(&b, "content %d role %q (%s) object %v, %d bytes\n", m, msg.WireRole, msg.Role, msg.Object, msg.End-msg.Start)
		for i := msg.Items.Start; i < msg.Items.End; i++ {
			it := c.Items[i]
			fmt.Fprintf(&b, "  %s", kinds[it.Kind])
			if it.Bound {
				b.WriteString(" bound")
			}
			if it.CallID != "" {
				fmt.Fprintf(&b, " id %s", it.CallID)
			}
			if it.Tool != "" {
				fmt.Fprintf(&b, " tool %s", it.Tool)
			}
			if it.Kind == wire.KindToolCall {
				fmt.Fprintf(&b, " args %s", f.CanonicalArguments(c, i))
			}
			if it.Content.Exists() {
				text := f.Text(c, i)
				if len(text) > 60 {
					text = text[:60] + "…"
				}
				fmt.Fprintf(&b, " %q", text)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestGoldenParses holds the parses of a request in the shape Gemini CLI
// sends (its context turn, thoughts, signed steps, its own ids on the
// responses) and of one body of every part kind to testdata/*.golden; go
// test -update rewrites them. Parsing changes no byte, and a LeaveOut of
// every content, parsed again, parses alike but for what it left out.
func TestGoldenParses(t *testing.T) {
	cli, err := os.ReadFile(filepath.Join("testdata", "gemini-cli-shape.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"every-part": []byte(every), "gemini-cli-shape": cli} {
		t.Run(name, func(t *testing.T) {
			c, ok := Format{Model: "gemini-3-pro-preview"}.Parse(body)
			if !ok {
				t.Fatal("not parsed")
			}
			if string(wire.Splice(body, nil)) != string(body) {
				t.Fatal("a render without edits is not the body")
			}
			got := describe(c)
			path := filepath.Join("testdata", name+".golden")
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

// TestGeminiCLIHistoryLeftOutKeepsTheRules leaves out the bound parts of
// every model content of the Gemini CLI request (all of earlier turns, as
// after a summary): the result is one Google takes (pairing, signatures
// where it validates them), and doing it again changes nothing.
func TestGeminiCLIHistoryLeftOutKeepsTheRules(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "gemini-cli-shape.json"))
	if err != nil {
		t.Fatal(err)
	}
	leave := func(body []byte) []byte {
		c, _ := Format{}.Parse(body)
		var eds []wire.Edit
		for m := range c.Messages {
			if e, _, ok := (Format{}).LeaveOut(c, m, count); ok {
				at := c.Messages[m].Start
				for _, ed := range e {
					eds = append(eds, wire.Edit{Start: at + ed.Start, End: at + ed.End, Repl: ed.Repl})
				}
			}
		}
		return outside(t, body, eds)
	}
	once := leave(body)
	if err := checkRules(once); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(once), `"thought":true`) || strings.Count(string(once), DummySignature) != 3 {
		t.Errorf("left out: %s", once)
	}
	if twice := leave(once); string(twice) != string(once) {
		t.Errorf("a second LeaveOut changed the body:\n%s", twice)
	}
}
