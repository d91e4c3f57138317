package proxy

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// expandOriginals are what a turn replaced, as the store keeps them: their
// bytes must come back exactly (both line ends, no final newline, bytes
// that are not UTF-8).
var expandOriginals = []expand.Original{
	expand.New(expand.KindSquash, "bash", "=== RUN TestA\n--- FAIL: TestA\r\n    a_test.go:12: want 4, got 5\nFAIL\tpkg\t0.01s"),
	expand.New(expand.KindDedup, "", "\x00\xff not UTF-8 \xc3\x28\n"),
}

// namespaceOfConversation sends one chat turn with headers and returns the
// namespace its record was written under: the conversation's own, as the
// server names it.
func namespaceOfConversation(t *testing.T, p *testProxy, st state.Store, headers map[string]string) string {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json", "X-Conversation-ID": "expand-test"}
	for k, v := range headers {
		h[k] = v
	}
	if status, body, _ := send(t, http.MethodPost, p.URL+"/v1/chat/completions",
		`{"model":"gpt-4o","messages":[{"role":"user","content":"run the tests"}]}`, h); status != http.StatusOK {
		t.Fatalf("chat turn: %d %s", status, body)
	}
	waitFor(t, p.recorderDrained, "the recorder")
	recs, err := st.List(state.ListOptions{ID: "expand-test"})
	if err != nil || len(recs) == 0 {
		t.Fatalf("the turn left no record: %v", err)
	}
	return recs[0].Key.Namespace
}

func getExpand(t *testing.T, url string, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	return send(t, http.MethodGet, url, "", headers)
}

// An agent gets an original back, byte-exact, with its conversation's own
// key, whichever header carries it; another key's lookup, or none, does
// not find it; and it is there after a restart.
func TestExpandAnswersUnderTheConversationsKey(t *testing.T) {
	up := openaitest.New(t)
	db := filepath.Join(t.TempDir(), "ctxpress.db")
	st := openStoreAt(t, db)
	cfg := Config{Upstream: up.BaseURL(), AuthKeys: []string{"cx-alice", "cx-bob"}}
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
	alice := map[string]string{"Authorization": "Bearer cx-alice"}
	ns := namespaceOfConversation(t, p, st, alice)
	if err := st.PutOriginals(ns, expandOriginals); err != nil { // as the turn that replaced them does
		t.Fatal(err)
	}

	check := func(p *testProxy, when string) {
		t.Helper()
		for _, o := range expandOriginals {
			for _, h := range []map[string]string{alice, {"x-api-key": "cx-alice"}, {HeaderClientKey: "cx-alice", "Authorization": "Bearer sk-provider"}} {
				status, body, hdr := getExpand(t, p.URL+admin.PathExpand+o.Ref, h)
				if status != http.StatusOK || body != o.Text {
					t.Fatalf("%s: GET %s with %v = %d %q; want 200 and the original byte-exact", when, o.Ref, h, status, body)
				}
				if ct := hdr.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
				if hdr.Get(admin.HeaderKind) != o.Kind || hdr.Get(admin.HeaderTool) != o.Tool {
					t.Errorf("%s: kind %q tool %q, want %q %q", o.Ref, hdr.Get(admin.HeaderKind), hdr.Get(admin.HeaderTool), o.Kind, o.Tool)
				}
			}
		}
	}
	check(p, "before a restart")

	o := expandOriginals[0]
	for _, c := range []struct {
		lines, want string
	}{
		{"2-3", "--- FAIL: TestA\r\n    a_test.go:12: want 4, got 5\n"},
		{"3", "    a_test.go:12: want 4, got 5\n"},
		{"4-", "FAIL\tpkg\t0.01s"},
		{"4-9", "FAIL\tpkg\t0.01s"},
		{"9-12", ""},
	} {
		status, body, hdr := getExpand(t, p.URL+admin.PathExpand+o.Ref+"?lines="+c.lines, alice)
		if status != http.StatusOK || body != c.want || hdr.Get(admin.HeaderTotalLines) != "4" {
			t.Errorf("lines %s: %d %q (of %s lines); want 200 %q (of 4)", c.lines, status, body, hdr.Get(admin.HeaderTotalLines), c.want)
		}
	}

	for _, c := range []struct {
		name    string
		path    string
		headers map[string]string
		status  int
		code    string
	}{
		{"another client key", o.Ref, map[string]string{"Authorization": "Bearer cx-bob"}, http.StatusNotFound, admin.CodeOriginalNotFound},
		{"no key", o.Ref, nil, http.StatusUnauthorized, codeInvalidKey},
		{"a reference never kept", expand.Ref("never"), alice, http.StatusNotFound, admin.CodeOriginalNotFound},
		{"not a reference", "not-a-ref", alice, http.StatusBadRequest, admin.CodeInvalidRef},
		{"a reference cut short", o.Ref[1:], alice, http.StatusBadRequest, admin.CodeInvalidRef},
		{"upper case", strings.ToUpper(o.Ref), alice, http.StatusBadRequest, admin.CodeInvalidRef},
		{"lines backwards", o.Ref + "?lines=9-2", alice, http.StatusBadRequest, admin.CodeInvalidLines},
		{"lines not numbers", o.Ref + "?lines=a-b", alice, http.StatusBadRequest, admin.CodeInvalidLines},
	} {
		status, body, hdr := getExpand(t, p.URL+admin.PathExpand+c.path, c.headers)
		if status != c.status || gjson.Get(body, "error.code").String() != c.code || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s; want %d with code %s", c.name, status, body, c.status, c.code)
		}
		if strings.Contains(body, "a_test.go") {
			t.Errorf("%s: the answer holds the original", c.name)
		}
	}
	if status, _, hdr := send(t, http.MethodPost, p.URL+admin.PathExpand+o.Ref, "", alice); status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q; want 405 naming GET", status, hdr.Get("Allow"))
	}

	p = restartOnSameDB(t, p, st, db, cfg, pipelineForTest())
	check(p, "after a restart")
}

// Without auth.keys the conversation's namespace is its Authorization
// header's (the provider key): the same header gets its originals back,
// another does not.
func TestExpandWithoutClientKeys(t *testing.T) {
	up := openaitest.New(t)
	p, st := startWithStore(t, Config{Upstream: up.BaseURL()})
	mine := map[string]string{"Authorization": "Bearer sk-mine"}
	ns := namespaceOfConversation(t, p, st, mine)
	if err := st.PutOriginals(ns, expandOriginals); err != nil {
		t.Fatal(err)
	}
	o := expandOriginals[1]
	if status, body, _ := getExpand(t, p.URL+admin.PathExpand+o.Ref, mine); status != http.StatusOK || body != o.Text {
		t.Fatalf("own key: %d %q", status, body)
	}
	for _, h := range []map[string]string{{"Authorization": "Bearer sk-theirs"}, nil} {
		if status, body, _ := getExpand(t, p.URL+admin.PathExpand+o.Ref, h); status != http.StatusNotFound {
			t.Errorf("with %v: %d %s; want 404", h, status, body)
		}
	}
}

// The operator's endpoint finds an original in any namespace, or in the
// one named, under the admin rule rather than a client key.
func TestOriginalsAdminEndpoint(t *testing.T) {
	up := openaitest.New(t)
	p, st := startWithStore(t, Config{Upstream: up.BaseURL(), AdminToken: "admin-secret", AuthKeys: []string{"cx-alice"}})
	ns := namespaceOfConversation(t, p, st, map[string]string{"Authorization": "Bearer cx-alice"})
	if err := st.PutOriginals(ns, expandOriginals); err != nil {
		t.Fatal(err)
	}
	o := expandOriginals[0]
	operator := map[string]string{"Authorization": "Bearer admin-secret"}
	for _, c := range []struct {
		query, want string
		status      int
	}{
		{"", o.Text, http.StatusOK},
		{"?lines=1", "=== RUN TestA\n", http.StatusOK},
		{"?namespace=" + ns, o.Text, http.StatusOK},
		{"?namespace=" + state.Namespace([]byte("Bearer cx-bob")), "", http.StatusNotFound},
	} {
		status, body, _ := getExpand(t, p.URL+"/ctxpress/originals/"+o.Ref+c.query, operator)
		if status != c.status || c.status == http.StatusOK && body != c.want {
			t.Errorf("originals%s: %d %q; want %d %q", c.query, status, body, c.status, c.want)
		}
	}
	if status, _, _ := getExpand(t, p.URL+"/ctxpress/originals/"+o.Ref, map[string]string{"Authorization": "Bearer cx-alice"}); status != http.StatusUnauthorized {
		t.Errorf("a client key on the operator's endpoint: %d, want 401", status)
	}
}

// Replicas share their originals on Redis: what a turn on one kept, an
// agent whose retrieval reaches another gets back byte-exact, under its
// own key only.
func TestExpandThroughASecondReplica(t *testing.T) {
	url := startRedis(t)
	up := openaitest.New(t)
	cfg := Config{Upstream: up.BaseURL(), AuthKeys: []string{"cx-alice", "cx-bob"}}
	st := openReplicaStore(t, url)
	first := startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
	second := startReplica(t, cfg, url)
	alice := map[string]string{"Authorization": "Bearer cx-alice"}
	ns := namespaceOfConversation(t, first, st, alice)
	if err := st.PutOriginals(ns, expandOriginals); err != nil {
		t.Fatal(err)
	}
	for _, o := range expandOriginals {
		if status, body, _ := getExpand(t, second.URL+admin.PathExpand+o.Ref, alice); status != http.StatusOK || body != o.Text {
			t.Errorf("second replica, %s: %d %q; want the original byte-exact", o.Ref, status, body)
		}
		if status, _, _ := getExpand(t, second.URL+admin.PathExpand+o.Ref, map[string]string{"Authorization": "Bearer cx-bob"}); status != http.StatusNotFound {
			t.Errorf("second replica, another key: %d, want 404", status)
		}
	}
}
