package replay

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/tidwall/gjson"
)

// A corpus trace is replayed as its client sent it: one request before each
// assistant message, then the whole body; each a valid request whose
// history is a prefix of the whole, every other byte as in the file.
func TestTurnsOfACorpusTraceAreTheRequestsItsClientSent(t *testing.T) {
	for _, tr := range corpustest.Traces(t)[:6] {
		turns, err := Turns(Chat, tr.Body)
		if err != nil {
			t.Fatal(err)
		}
		whole := gjson.GetBytes(tr.Body, "messages").Array()
		assistants := 0
		for _, m := range whole {
			if m.Get("role").String() == "assistant" {
				assistants++
			}
		}
		if len(turns) != assistants+1 {
			t.Errorf("%s: %d requests for %d assistant messages, want one before each and the whole", tr.Name, len(turns), assistants)
		}
		if !bytes.Equal(turns[len(turns)-1], tr.Body) {
			t.Errorf("%s: the last request is not the whole body", tr.Name)
		}
		arr := gjson.GetBytes(tr.Body, "messages")
		outside := append(append([]byte(nil), tr.Body[:arr.Index]...), tr.Body[arr.Index+len(arr.Raw):]...)
		prev := 0
		for k, turn := range turns {
			if err := chatcheck.ValidateChat(turn); err != nil {
				t.Errorf("%s: request %d: %v", tr.Name, k+1, err)
			}
			msgs := gjson.GetBytes(turn, "messages")
			got := msgs.Array()
			if len(got) <= prev || got[len(got)-1].Get("role").String() == "assistant" {
				t.Errorf("%s: request %d has %d messages ending %s", tr.Name, k+1, len(got), got[len(got)-1].Get("role"))
			}
			for i, m := range got {
				if m.Raw != whole[i].Raw {
					t.Fatalf("%s: request %d: message %d differs from the file's", tr.Name, k+1, i)
				}
			}
			rest := append(append([]byte(nil), turn[:msgs.Index]...), turn[msgs.Index+len(msgs.Raw):]...)
			if !bytes.Equal(rest, outside) {
				t.Errorf("%s: request %d: the bytes outside messages are not the file's", tr.Name, k+1)
			}
			prev = len(got)
		}
	}
}

func TestDetectTellsTheFormatByShape(t *testing.T) {
	for _, tc := range []struct {
		rule string
		body string
		want Format
	}{
		{"input and no messages: Responses", `{"model":"m","input":[{"role":"user","content":"hi"}]}`, Responses},
		{"a top-level system: Messages", `{"model":"m","system":"s","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, Messages},
		{"a tool_result block: Messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`, Messages},
		{"a tool message: chat", `{"model":"m","max_tokens":5,"messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`, Chat},
		{"nothing decides: chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, Chat},
	} {
		if got := detect([][]byte{[]byte(tc.body)}); got != tc.want {
			t.Errorf("%s: got %s", tc.rule, got)
		}
	}
	// The first line that decides decides the file.
	lines := [][]byte{[]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`),
		[]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}]}`)}
	if got := detect(lines); got != Messages {
		t.Errorf("a file whose second line is Messages: got %s", got)
	}
}

func TestLoadSetsTheModelOfEveryRequest(t *testing.T) {
	path := filepath.Join(corpustest.Dir(t), "traces", "openhands-runtime-basic.json")
	sessions, err := ReadFile(path, filepath.Base(path), LoadOptions{BodyModel: "replay-model"})
	if err != nil {
		t.Fatal(err)
	}
	s := sessions[0]
	if s.Name != "openhands-runtime-basic.json" || s.Format != Chat || len(s.Requests) != 2 {
		t.Fatalf("loaded %s, %s, %d requests", s.Name, s.Format, len(s.Requests))
	}
	for i, r := range s.Requests {
		if m := gjson.GetBytes(r, "model").String(); m != "replay-model" {
			t.Errorf("request %d names model %q", i+1, m)
		}
	}
}
