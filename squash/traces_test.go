package squash

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// toolOutput is one role:tool message text (or one text part of it), with
// the call that produced it.
type toolOutput struct {
	file, tool, args, text string
}

func (o toolOutput) call() Call { return Call{Tool: o.tool, Args: o.args} }

// corpusToolOutputs reads every tool message of every trace in the corpus.
func corpusToolOutputs(t testing.TB) []toolOutput {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(corpusDir(t), "traces", "*.json"))
	if len(files) == 0 {
		t.Skip("no traces in corpus")
	}
	var out []toolOutput
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Messages []struct {
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
			} `json:"messages"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names, args := map[string]string{}, map[string]string{}
		for _, m := range body.Messages {
			for _, tc := range m.ToolCalls {
				names[tc.ID], args[tc.ID] = tc.Function.Name, tc.Function.Arguments
			}
			if m.Role != "tool" {
				continue
			}
			base := filepath.Base(f)
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				out = append(out, toolOutput{base, names[m.ToolCallID], args[m.ToolCallID], s})
				continue
			}
			var parts []struct {
				Type, Text string
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				t.Fatalf("%s: tool content: %v", f, err)
			}
			for _, p := range parts {
				if p.Type == "text" {
					out = append(out, toolOutput{base, names[m.ToolCallID], args[m.ToolCallID], p.Text})
				}
			}
		}
	}
	return out
}

// TestCorpusToolOutputs squashes every tool message of the trace corpus
// twice, with its call, and checks what a user would notice: never longer,
// deterministic, valid UTF-8 kept valid, JSON kept JSON, exempt tools and
// shell reads untouched.
func TestCorpusToolOutputs(t *testing.T) {
	outs := corpusToolOutputs(t)
	s := New(Config{})
	shapes := map[Shape]int{}
	var before, after, squashed int
	for _, o := range outs {
		r := s.ApplyCall(o.call(), o.text)
		if r2 := s.ApplyCall(o.call(), o.text); !reflect.DeepEqual(r2, r) {
			t.Fatalf("%s (%s): not deterministic", o.file, o.tool)
		}
		if len(r.Text) > len(o.text) {
			t.Errorf("%s (%s): output %d bytes > input %d", o.file, o.tool, len(r.Text), len(o.text))
		}
		if !r.Squashed && r.Text != o.text {
			t.Errorf("%s (%s): unsquashed result differs from input", o.file, o.tool)
		}
		if utf8.ValidString(o.text) && !utf8.ValidString(r.Text) {
			t.Errorf("%s (%s): output is not valid UTF-8", o.file, o.tool)
		}
		if r.Shape == ShapeJSON && !json.Valid([]byte(r.Text)) {
			t.Errorf("%s (%s): JSON output is not valid JSON", o.file, o.tool)
		}
		if r.Squashed && containsString(DefaultExemptTools, o.tool) {
			t.Errorf("%s: exempt tool %s was squashed", o.file, o.tool)
		}
		if _, read := s.shellRead(o.call()); read && r.Text != o.text {
			t.Errorf("%s: a shell read was changed: %.100s", o.file, o.args)
		}
		shapes[r.Shape]++
		before += r.TokensBefore
		after += r.TokensAfter
		if r.Squashed {
			squashed++
		}
	}
	t.Logf("%d tool outputs, %d squashed (json %d, log %d, generic %d); tokens %d -> %d (-%.1f%%)",
		len(outs), squashed, shapes[ShapeJSON], shapes[ShapeLog], shapes[ShapeGeneric],
		before, after, 100*float64(before-after)/float64(before))
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCorpusTracesAsJSON squashes whole trace files, real JSON documents of
// up to 868 KB, and checks the result is valid JSON, deterministic, shorter.
func TestCorpusTracesAsJSON(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir(t), "traces", "*.json"))
	s := New(Config{})
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Apply("http_get", string(data))
		if r.Shape != ShapeJSON || !r.Squashed {
			t.Errorf("%s: shape %q squashed=%v, want json squashed", filepath.Base(f), r.Shape, r.Squashed)
			continue
		}
		if !json.Valid([]byte(r.Text)) {
			t.Errorf("%s: squashed JSON is invalid", filepath.Base(f))
		}
		if r.Text != s.Apply("http_get", string(data)).Text {
			t.Errorf("%s: not deterministic", filepath.Base(f))
		}
		if !strings.Contains(r.Text, `"messages":[`) {
			t.Errorf("%s: top-level key lost", filepath.Base(f))
		}
	}
}
