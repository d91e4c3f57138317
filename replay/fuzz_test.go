package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzTranscriptReaders: no file makes the readers panic, and whatever
// they read is requests of their format: valid JSON with the history
// array, a model among those the requests name. The seeds, the fixtures'
// first lines and a few odd ones, run in plain `go test`.
func FuzzTranscriptReaders(f *testing.F) {
	for _, fx := range fixtures {
		b, err := os.ReadFile(filepath.Join(fixtureHome, fx.path))
		if err != nil {
			f.Fatal(err)
		}
		// Its short lines: what the readers tell apart is in them, and the
		// fuzzer minimises a large input for minutes.
		var seed []byte
		for _, line := range bytes.SplitAfter(b, []byte{'\n'}) {
			if len(line) < 2000 && len(seed) < 16000 {
				seed = append(seed, line...)
			}
		}
		f.Add(seed)
	}
	for _, s := range []string{
		``, "\n\n", `{`, `[]`, `{"type":"response_item","payload":null}`,
		`{"type":"compacted","payload":{"replacement_history":[1,{"type":"message","role":"user"}]}}`,
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"x"}}` + "\n" + `{"type":"response_item","payload":{"type":"reasoning"}}`,
		`{"type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":99}}`,
		`{"type":"assistant","uuid":"a","parentUuid":"a","sessionId":"s","message":{"id":"m","content":"x"}}`,
		`{"type":"assistant","uuid":"a","parentUuid":"b","sessionId":"s","message":{"content":[{"type":"tool_use","id":"t"}]}}` + "\n" +
			`{"type":"user","uuid":"b","parentUuid":"a","sessionId":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t"}]}}`,
		`{"type":"api-request","sessionId":"s","id":"r","keep":5,"tail":["zz"],"params":{"model":"m"}}`,
		`{"type":"api-request-shape","shapeHash":"h","shape":{}}` + "\n" +
			`{"type":"api-request","sessionId":"s","id":"r","shapeHash":"h","keep":0,"tail":[],"cacheControl":[{"path":["messages",-1,"content"],"value":{}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = detectKind(data)
		var convs []conversation
		if c, err := claudeCodeConversations(data); err == nil {
			convs = append(convs, c...)
		}
		if c, err := codexConversation(data); err == nil {
			convs = append(convs, c)
		}
		for _, c := range convs {
			models := map[string]bool{}
			for _, r := range c.requests {
				if !json.Valid(r) {
					t.Fatalf("not JSON: %s", r)
				}
				if !gjson.GetBytes(r, "messages").IsArray() && !gjson.GetBytes(r, "input").IsArray() {
					t.Fatalf("no history: %s", r)
				}
				models[gjson.GetBytes(r, "model").String()] = true
			}
			if len(c.requests) > 0 && !models[c.model] {
				t.Fatalf("model %q is none of its requests'", c.model)
			}
		}
	})
}
