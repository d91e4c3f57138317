package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ctxpress/ctxpress/admin"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
)

// seedDB writes two conversations, one with a summary, and closes the db:
// "fix-leap-year" was updated a minute after "older".
func seedDB(t *testing.T, path string) {
	t.Helper()
	now := time.Now()
	// No background sweep: it would read the clock while the seed moves it.
	st, err := state.OpenBolt(path, state.BoltOptions{Now: func() time.Time { return now }, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Update(state.NewKey([]byte("Bearer a"), "older"), func(r *state.Record) error {
		r.Model = "gpt-4o-mini"
		r.AddTurn(state.Turn{At: now, TokensBefore: 100, TokensAfter: 100})
		return nil
	})
	now = now.Add(time.Minute)
	st.Update(state.NewKey([]byte("Bearer a"), "fix-leap-year"), func(r *state.Record) error {
		r.Model = "gpt-4o"
		for i := 0; i < 5; i++ {
			r.AddTurn(state.Turn{At: now, TokensBefore: 1000 * (i + 1), TokensAfter: 800 * (i + 1), Compacted: i == 3})
		}
		kept := history.Kept{Ref: "3f9a2c1b4d5e", First: 1, Last: 6, Note: "The 6 earlier messages this summary replaces are kept"}
		r.PutBranch(state.Branch{Branch: history.Branch{Summary: "## Active Task\nPatch parse.go", Covered: 6, Hash: state.ChainHash{1}, Kept: kept}}, now)
		r.AddSummaryHistory(state.SummaryEntry{At: now, Summary: "## Active Task\nOlder", CoveredMessages: 3})
		r.AddSummaryHistory(state.SummaryEntry{At: now, Summary: "## Active Task\nPatch parse.go", CoveredMessages: 6, Kept: kept})
		return nil
	})
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"conversations"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// list, show, compact and rm on the db file while no server holds it.
func TestConversationsCLIOnTheDB(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ctxpress.db")
	seedDB(t, db)

	code, out, errs := runCLI(t, "list", "--db", db)
	if code != 0 || !strings.Contains(out, "CONVERSATION") || strings.Index(out, "fix-leap-year") > strings.Index(out, "older") {
		t.Fatalf("list: %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "list", "--db", db, "--json", "--limit", "1")
	var page admin.ConversationPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Data) != 1 || !page.HasMore || page.Data[0].TokensSaved != 3000 {
		t.Fatalf("list --json: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "show", "fix-leap-year", "--db", db)
	if code != 0 || !strings.Contains(out, "Patch parse.go") || !strings.Contains(out, "compacted") || !strings.Contains(out, "15000 before, 12000 after, 3000 saved") {
		t.Fatalf("show: %d\n%s", code, out)
	}
	// Each compaction with the range of messages it replaced and the
	// reference they are kept under, or that they are not.
	if !regexp.MustCompile(`(?m)^  \S+ \S+  6 +1-6 +3f9a2c1b4d5e$`).MatchString(out) || !regexp.MustCompile(`(?m)^  \S+ \S+  3 +- +\(not kept\)$`).MatchString(out) ||
		!strings.Contains(out, "ctxpress expand REF") || !strings.Contains(out, "messages 1-6 it replaced are kept: ctxpress expand 3f9a2c1b4d5e") {
		t.Fatalf("show does not list the compactions with what they kept:\n%s", out)
	}
	if code, _, errs := runCLI(t, "show", "nobody", "--db", db); code != 1 || !strings.Contains(errs, "no such conversation") {
		t.Fatalf("show unknown: %d %s", code, errs)
	}
	if code, out, errs := runCLI(t, "compact", "fix-leap-year", "--db", db); code != 0 || !strings.Contains(out, "next request") {
		t.Fatalf("compact: %d %s %s", code, out, errs)
	}
	code, out, _ = runCLI(t, "show", "fix-leap-year", "--db", db, "--json")
	var shown struct{ Data []admin.ConversationDetail }
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || !shown.Data[0].Breaker.ForceNext || len(shown.Data[0].Turns) != 5 {
		t.Fatalf("show --json after compact: %d %s", code, out)
	}
	if k := shown.Data[0].CurrentSummary.Kept; k == nil || *k != (admin.KeptInfo{Ref: "3f9a2c1b4d5e", First: 1, Last: 6}) {
		t.Fatalf("show --json: the current summary's kept messages are %+v", k)
	}
	if code, out, errs := runCLI(t, "rm", "older", "--db", db); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("rm: %d %s %s", code, out, errs)
	}
	if _, out, _ := runCLI(t, "list", "--db", db); strings.Contains(out, "older") {
		t.Fatalf("rm left it:\n%s", out)
	}
	if code, _, errs := runCLI(t, "list", "--db", filepath.Join(t.TempDir(), "missing.db")); code != 1 || !strings.Contains(errs, "no db at") {
		t.Fatalf("missing db: %d %s", code, errs)
	}
	if code, _, _ := runCLI(t, "frobnicate"); code != 2 {
		t.Fatalf("unknown sub-command: %d", code)
	}
}

// While a server holds the db, the CLI goes through its admin API (found
// from the config's listen address), with the admin token from the config;
// without a server to ask it says what to do.
func TestConversationsCLIWhileServing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ctxpress.db")
	seedDB(t, db)
	st, err := state.OpenBolt(db, state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := proxy.New(proxy.Config{Upstream: "http://127.0.0.1:1/v1", AdminToken: "tok"}, zerolog.Nop(), proxy.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen: %s\ndb: %s\nadmin_token: tok\n", ln.Addr(), db)), 0o600)

	code, out, errs := runCLI(t, "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "fix-leap-year") {
		t.Fatalf("list through the API: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCLI(t, "show", "fix-leap-year", "--config", cfg); code != 0 || !strings.Contains(out, "Patch parse.go") {
		t.Fatalf("show through the API: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "compact", "fix-leap-year", "--config", cfg); code != 0 {
		t.Fatalf("compact through the API: %d %s", code, errs)
	}
	if rec, _, _ := st.Get(state.NewKey([]byte("Bearer a"), "fix-leap-year")); !rec.ForceNext {
		t.Fatal("compact through the API did not schedule")
	}
	if code, _, errs := runCLI(t, "rm", "older", "--server", "http://"+ln.Addr().String(), "--admin-token", "tok"); code != 0 {
		t.Fatalf("rm through --server: %d %s", code, errs)
	}
	if _, ok, _ := st.Get(state.NewKey([]byte("Bearer a"), "older")); ok {
		t.Fatal("rm through the API left the record")
	}
	if code, _, errs := runCLI(t, "list", "--server", "http://"+ln.Addr().String(), "--admin-token", "wrong"); code != 1 || !strings.Contains(errs, "--admin-token") {
		t.Fatalf("wrong token: %d %s", code, errs)
	}
	// Locked, and nobody answers at the configured address.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen: %s\ndb: %s\n", addr, db)), 0o600)
	code, _, errs = runCLI(t, "rm", "fix-leap-year", "--config", cfg)
	if code != 1 || !strings.Contains(errs, "locked") || !strings.Contains(errs, "--server") {
		t.Fatalf("locked without a server: %d %s", code, errs)
	}
}

// Without --db or a config, the CLI finds the db serve uses by default
// (in the user data directory) from any working directory; while a server
// holds it, or when there is no db but a server answers at the listen
// address, it asks that server; with neither, it says so.
func TestConversationsFindTheDefaultDBFromAnotherDirectory(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	t.Setenv("HOME", t.TempDir())
	for _, v := range []string{"CTXPRESS_CONFIG", "CTXPRESS_DB", "CTXPRESS_LISTEN", "CTXPRESS_REDIS_URL"} {
		t.Setenv(v, "")
	}
	db := filepath.Join(xdg, "ctxpress", "ctxpress.db")
	seedDB(t, db)
	t.Chdir(t.TempDir())
	if code, out, errs := runCLI(t, "list"); code != 0 || !strings.Contains(out, "fix-leap-year") {
		t.Fatalf("list from another directory: %d\n%s%s", code, out, errs)
	}

	st, err := state.OpenBolt(db, state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := proxy.New(proxy.Config{Upstream: "http://127.0.0.1:1/v1"}, zerolog.Nop(), proxy.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	// The server's listen address, as serve took it from the environment.
	t.Setenv("CTXPRESS_LISTEN", ln.Addr().String())
	if code, out, errs := runCLI(t, "show", "fix-leap-year"); code != 0 || !strings.Contains(out, "Patch parse.go") {
		t.Fatalf("show while the server holds the default db: %d\n%s%s", code, out, errs)
	}
	// A server whose db is elsewhere (or in memory), none at the default.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	if code, out, errs := runCLI(t, "list"); code != 0 || !strings.Contains(out, "fix-leap-year") {
		t.Fatalf("list with no default db, a server answering: %d\n%s%s", code, out, errs)
	}
	srv.Shutdown(context.Background())
	code, _, errs := runCLI(t, "list")
	if code != 1 || !strings.Contains(errs, "no db at") || !strings.Contains(errs, "no ctxpress answering at http://"+ln.Addr().String()) {
		t.Fatalf("neither a db nor a server: %d %s", code, errs)
	}
}
