package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// grepOutput is a search that prints n matches.
func grepOutput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "pkg/mod%03d/handler_%d.go:%d:\tfunc (h *ServeHTTP%d) Serve(rw http.ResponseWriter, req *http.Request) {\n", i, i, 10+i*7, i)
	}
	return b.String()
}

// framed is a command's output as codex frames it, in run details that
// change on every run: dedup compares what the command printed.
func framed(out string) string {
	return "Exit code: 0\nWall time: 0.2 seconds\nOutput:\n" + out
}

// Every kind of marker (a squashed output, a deduped one, a pruned one) in
// every format names a reference that comes back byte-exact: the tool
// output as the client sent it, over HTTP under the conversation's key,
// from the file an agent on this machine reads, and again after ctxpress
// restarts on the same db; under another key it is not found.
func TestEveryMarkerKindComesBackExactly(t *testing.T) {
	for _, f := range followFormats {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := state.OpenOriginalFiles(filepath.Join(dir, "originals"), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			up := formatUpstream(t, f)
			ways := &expand.Ways{Dir: files.Dir}
			dedup := rewrite.DefaultDedupConfig()
			dedup.MinTokens = -1
			pipeline := rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{}, Dedup: dedup,
				Prune: rewrite.PruneConfig{Enabled: true, MinTokens: 200}, Expand: ways})
			cfg := unprobed(Config{Upstream: up.BaseURL()})
			hosted := false // priced as a hosted model, where the dedup pays for the cache it breaks
			cfg.LocalUpstream = &hosted
			dbPath := filepath.Join(dir, "ctxpress.db")
			st := openStoreAt(t, dbPath)
			p := startProxyWith(t, cfg, Deps{Pipeline: pipeline, Store: st, Files: files})

			text := func(role, s string) any { return map[string]any{"role": role, "content": s} }
			outputs := map[string]string{
				"t1": failingTests(300),        // pruned once the next ask opens
				"g1": framed(grepOutput(120)),  // a search superseded by g2: deduped
				"g2": framed(grepOutput(121)),  // squashed
				"t2": failingTests(400) + "\n", // squashed
			}
			history := f.exchange("t1", "pytest -x", outputs["t1"])
			history = append(history, text("assistant", "Two tests fail."), text("user", "Fix them."))
			opening := len(history)
			history = append(history, f.exchange("g1", "grep -rn ServeHTTP .", outputs["g1"])...)
			history = append(history, f.exchange("g2", "grep -rn ServeHTTP .", outputs["g2"])...)
			history = append(history, f.exchange("t2", "pytest -x", outputs["t2"])...)
			post := func(base string, h []any) string {
				t.Helper()
				body, _ := json.Marshal(f.request(h))
				code, out, _ := send(t, http.MethodPost, base+f.path, string(body),
					map[string]string{"Authorization": "Bearer sk-agent", "X-Session-ID": "kinds-" + f.name})
				if code != 200 {
					t.Fatalf("%d %s", code, out)
				}
				return string(up.Requests()[len(up.Requests())-1].Body)
			}
			var fwd string
			for n := opening; n <= len(history); n += 2 { // as an agent sends them, one exchange at a time
				fwd = post(p.URL, history[:n])
			}

			want := map[string]string{"t1": expand.KindPrune, "g1": expand.KindDedup, "g2": expand.KindSquash, "t2": expand.KindSquash}
			if f.name == "messages" {
				// Anthropic's history is bound to its thinking: dedup only
				// stubs a word-for-word repeat, pointing to the earlier
				// result kept in the context, never rewriting that one.
				want["g1"] = expand.KindSquash
			}
			if want["g1"] == expand.KindDedup && !strings.Contains(fwd, "[duplicate result: superseded") || !strings.Contains(fwd, "[old output pruned by ctxpress; original intact") {
				t.Fatalf("no dedup or prune marker in the forwarded body:\n%s", fwd)
			}
			kinds := map[string]string{}
			for _, m := range regexp.MustCompile(`(?:ref |/)([0-9a-f]{12})(?:\.txt|[\]"\\ ])`).FindAllStringSubmatch(fwd, -1) {
				kinds[m[1]] = ""
			}
			for id, kind := range want {
				ref := expand.Ref(outputs[id])
				if _, named := kinds[ref]; !named {
					t.Errorf("%s (%s): its reference %s is not named in the forwarded body", id, kind, ref)
					continue
				}
				get := func(base, key string) (int, string, string) {
					req, _ := http.NewRequest(http.MethodGet, base+"/ctxpress/expand/"+ref, nil)
					req.Header.Set("Authorization", "Bearer "+key)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					return resp.StatusCode, string(b), resp.Header.Get("X-Ctxpress-Kind")
				}
				// The store keeps the kind of the first marker that named it
				// (g1 was squashed before a later search superseded it).
				if code, body, k := get(p.URL, "sk-agent"); code != 200 || body != outputs[id] || k != kind && !(id == "g1" && k == expand.KindSquash) {
					t.Errorf("%s: GET %s = %d, kind %q, body equal %v", id, ref, code, k, body == outputs[id])
				}
				if code, _, _ := get(p.URL, "sk-someone-else"); code != http.StatusNotFound {
					t.Errorf("%s: another key got %d", id, code)
				}
				if b, err := os.ReadFile(ways.File(ref)); err != nil || string(b) != outputs[id] {
					t.Errorf("%s: file %v, equal %v", id, err, string(b) == outputs[id])
				}
			}
			p2 := restartOnSameDB(t, p, st, dbPath, cfg, pipeline)
			for id := range want {
				ref := expand.Ref(outputs[id])
				req, _ := http.NewRequest(http.MethodGet, p2.URL+"/ctxpress/expand/"+ref, nil)
				req.Header.Set("Authorization", "Bearer sk-agent")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != outputs[id] {
					t.Errorf("%s after a restart: %d, equal %v", id, resp.StatusCode, string(b) == outputs[id])
				}
			}
		})
	}
}
