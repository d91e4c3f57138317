package messages

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
// then one line per message and one per item, texts cut to 60 bytes.
func describe(c *wire.Conversation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %q stream %v lead %d system-slot %v standing %v bound %v session %q counted %d\n",
		c.Model, c.Stream, c.Lead, c.SystemSlot, c.StandingInstructions, c.Bound, c.SessionID, len(c.Counted))
	kinds := map[wire.Kind]string{wire.KindOpaque: "opaque", wire.KindInstruction: "instruction", wire.KindUser: "user",
		wire.KindAssistant: "assistant", wire.KindToolCall: "call", wire.KindToolResult: "result"}
	f := Format{}
	for m, msg := range c.Messages {
		fmt.Fprintf(&b, "message %d role %q (%d) object %v, %d bytes\n", m, msg.WireRole, msg.Role, msg.Object, msg.End-msg.Start)
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
				fmt.Fprintf(&b, " tool %s args %s", it.Tool, f.CanonicalArguments(c, i))
			}
			if it.Content.Exists() {
				text := f.Text(c, i)
				if len(text) > 60 {
					text = text[:60] + "…"
				}
				fmt.Fprintf(&b, " %c %q", c.Body[it.Content.Start], text)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestGoldenParses holds the parse of Claude Code's captured requests (and
// of one body of every block type) to testdata/*.golden; go test -update
// rewrites them. Parsing changes no byte: the conversation's spans cover
// the body as sent.
func TestGoldenParses(t *testing.T) {
	inputs := map[string][]byte{"every-block": []byte(every)}
	for _, name := range []string{"turn1", "turn6", "persisted-output"} {
		inputs["claude-code-2.1.332-"+name] = capture(t, name)
	}
	for name, body := range inputs {
		t.Run(name, func(t *testing.T) {
			c, ok := Format{}.Parse(body)
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
