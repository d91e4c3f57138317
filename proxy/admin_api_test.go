package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/admin"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// The conversations API over a real db: list (paged, newest first), show
// (every namespace with the id, summary, branches, breaker, turns),
// compact, delete, and OpenAI-shaped errors.
func TestConversationsAPI(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "shared/id") // a slash: sent as %2F
	for i := 0; i < 20; i++ {
		a.turn(false)
	}
	// The same id under another key is another conversation.
	b := newAgent(t, p.BaseURL(), "shared/id")
	b.client = openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-other"), option.WithMaxRetries(0))
	b.turn(false)
	c := newAgent(t, p.BaseURL(), "newest")
	c.turn(false)
	// Records are written off the request path, each key on its own:
	// wait for all three, and for the 20 turns of the first.
	waitFor(t, func() bool {
		recs, _ := st.List(state.ListOptions{})
		first, _, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "shared/id"))
		return len(recs) == 3 && recs[0].Key.ID == "newest" && first.Requests == 20
	}, "records")

	var page struct {
		Data    []admin.ConversationInfo `json:"data"`
		HasMore bool                     `json:"has_more"`
	}
	getJSON(t, p.URL+"/ctxpress/conversations?limit=2", &page)
	if len(page.Data) != 2 || !page.HasMore || page.Data[0].ID != "newest" {
		t.Fatalf("first page: %+v", page)
	}
	getJSON(t, p.URL+"/ctxpress/conversations?offset=2&limit=2", &page)
	if len(page.Data) != 1 || page.HasMore || page.Data[0].ID != "shared/id" || page.Data[0].Requests != 20 || page.Data[0].Compactions == 0 {
		t.Fatalf("second page: %+v", page)
	}

	var show struct {
		Data []admin.ConversationDetail `json:"data"`
	}
	getJSON(t, p.URL+"/ctxpress/conversations/shared%2Fid", &show)
	if len(show.Data) != 2 {
		t.Fatalf("an id in two namespaces: %d matches", len(show.Data))
	}
	ns := state.NewKey([]byte("Bearer sk-agent"), "x").Namespace
	getJSON(t, p.URL+"/ctxpress/conversations/shared%2Fid?namespace="+ns, &show)
	d := show.Data[0]
	if len(show.Data) != 1 || d.Namespace != ns || len(d.Turns) != 20 || d.CurrentSummary == nil ||
		!strings.Contains(d.CurrentSummary.Summary, "Fix the build.") || len(d.Branches) == 0 || len(d.RecentSummaries) == 0 {
		t.Fatalf("detail: %+v", d)
	}

	if code, body := adminDo(t, http.MethodPost, p.URL+"/ctxpress/conversations/shared%2Fid/compact?namespace="+ns, nil); code != http.StatusAccepted {
		t.Fatalf("compact: %d %s", code, body)
	}
	if rec, _, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "shared/id")); !rec.ForceNext {
		t.Fatal("compact did not schedule")
	}
	if code, body := adminDo(t, http.MethodDelete, p.URL+"/ctxpress/conversations/shared%2Fid", nil); code != http.StatusOK || !strings.Contains(string(body), `"deleted":2`) {
		t.Fatalf("delete: %d %s", code, body)
	}
	code, body := adminDo(t, http.MethodGet, p.URL+"/ctxpress/conversations/shared%2Fid", nil)
	var e struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if json.Unmarshal(body, &e); code != http.StatusNotFound || e.Error.Type != "ctxpress_error" || e.Error.Code != "conversation_not_found" {
		t.Fatalf("after delete: %d %s", code, body)
	}
	for _, bad := range []string{"/ctxpress/conversations?limit=x", "/ctxpress/events?types=bogus"} {
		if code, body := adminDo(t, http.MethodGet, p.URL+bad, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	if code, _ := adminDo(t, http.MethodPut, p.URL+"/ctxpress/conversations/newest", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", code)
	}
}

// With an admin token every admin endpoint but healthz needs it (header or
// the dashboard's cookie); /ctxpress/ui?token= sets the cookie; a change
// from another site's page is refused.
func TestAdminTokenEnforced(t *testing.T) {
	up := openaitest.New(t)
	p, st := startWithStore(t, Config{Upstream: up.BaseURL(), AdminToken: "s3cret"})
	st.Update(state.NewKey([]byte("k"), "c1"), func(r *state.Record) error { r.Requests = 1; return nil })
	bearer := map[string]string{"Authorization": "Bearer s3cret"}
	for _, path := range []string{"conversations", "conversations/c1", "stats", "ui", "ui/app.js", "events"} {
		if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/"+path, nil); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, code)
		}
		if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/"+path, map[string]string{"Authorization": "Bearer wrong"}); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d", path, code)
		}
	}
	for _, m := range []string{http.MethodDelete, http.MethodPost} {
		path := "/ctxpress/conversations/c1"
		if m == http.MethodPost {
			path += "/compact"
		}
		if code, _ := adminDo(t, m, p.URL+path, nil); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", m, code)
		}
	}
	if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/healthz", nil); code != http.StatusOK {
		t.Errorf("healthz: %d", code)
	}
	if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/stats", bearer); code != http.StatusOK {
		t.Errorf("stats with the token: %d", code)
	}
	if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/stats", map[string]string{"Authorization": "s3cret"}); code != http.StatusUnauthorized {
		t.Errorf("a bare token without Bearer: %d", code)
	}
	if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/stats", map[string]string{"Cookie": admin.Cookie + "=s3cret"}); code != http.StatusOK {
		t.Errorf("stats with the cookie: %d", code)
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(p.URL + "/ctxpress/ui?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("ui login with a wrong token: %d", resp.StatusCode)
	}
	resp, err = noRedirect.Get(p.URL + "/ctxpress/ui?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookie := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "/ctxpress/ui") ||
		!strings.Contains(cookie, admin.Cookie+"=s3cret") || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") {
		t.Fatalf("ui login: %d %q %q", resp.StatusCode, resp.Header.Get("Location"), cookie)
	}

	cross := map[string]string{"Authorization": "Bearer s3cret", "Sec-Fetch-Site": "cross-site"}
	if code, _ := adminDo(t, http.MethodDelete, p.URL+"/ctxpress/conversations/c1", cross); code != http.StatusForbidden {
		t.Errorf("cross-site delete: %d", code)
	}
	evil := map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}
	if code, _ := adminDo(t, http.MethodPost, p.URL+"/ctxpress/conversations/c1/compact", evil); code != http.StatusForbidden {
		t.Errorf("foreign-origin compact: %d", code)
	}
	if code, body := adminDo(t, http.MethodDelete, p.URL+"/ctxpress/conversations/c1", bearer); code != http.StatusOK {
		t.Errorf("delete with the token: %d %s", code, body)
	}
	if len(up.Requests()) != 0 {
		t.Fatal("an admin request reached the upstream")
	}
}

// The dashboard's files are served from the binary with a strict CSP.
func TestUIAssets(t *testing.T) {
	p := startProxy(t, Config{Upstream: "http://127.0.0.1:1/v1"})
	for path, ct := range map[string]string{"ui": "text/html", "ui/app.js": "text/javascript", "ui/style.css": "text/css"} {
		resp, err := http.Get(p.URL + "/ctxpress/" + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(b) == 0 ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: %d %q %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
		if strings.Contains(string(b), "innerHTML") || strings.Contains(string(b), "http://") && path != "ui/app.js" {
			t.Errorf("%s uses innerHTML or loads from elsewhere", path)
		}
	}
	if code, _ := adminDo(t, http.MethodGet, p.URL+"/ctxpress/ui/nope.js", nil); code != http.StatusNotFound {
		t.Errorf("unknown asset: %d", code)
	}
}
