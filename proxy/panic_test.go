package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// panickyStore reads like a corrupt bbolt file, which panics ("page 7
// already freed") instead of returning an error.
type panickyStore struct{ state.Store }

func (panickyStore) Get(state.Key) (state.Record, bool, error) { panic("page 7 already freed") }

// A panic while a chat request is handled, outside the pipeline's own
// safety net (here the store's), is answered 500 in the OpenAI error
// shape and ends as every request does: one access-log line with the
// status and the error, and the 500 counted in /metrics. It used to be
// answered and nothing else: no log line, no count, and a lease or gate
// share taken before it never returned.
func TestHandlerPanicIsLoggedAndCounted(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	deps.Store = panickyStore{deps.Store}
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)

	status, body, _ := send(t, "POST", p.BaseURL()+"/chat/completions",
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Content-Type": "application/json"})
	if status != 500 || !strings.Contains(body, `"code":"internal_error"`) {
		t.Fatalf("a panicking handler answered %d %s", status, body)
	}
	if n := value(scrape(t, p.URL), "ctxpress_requests_total", "path", "/v1/chat/completions", "status", "500"); n != 1 {
		t.Errorf("ctxpress_requests_total{status=500} = %v, want 1", n)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(p.logs.String()), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) == nil && e["message"] == "request" {
			lines = append(lines, e)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d access-log lines, want 1:\n%s", len(lines), p.logs.String())
	}
	if e := lines[0]; e["status"] != float64(500) || e["path"] != "/v1/chat/completions" || !strings.Contains(e["error"].(string), "page 7 already freed") {
		t.Errorf("access-log line %v", e)
	}
}
