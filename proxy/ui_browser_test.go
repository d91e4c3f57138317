package proxy

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
	"github.com/openai/openai-go/v3/option"
)

// chromiumPath is where Debian's chromium package puts the browser
// (.ci/chromium.sh installs it).
const chromiumPath = "/usr/bin/chromium"

// artifactDir is where the browser test keeps its screenshots:
// $CTXPRESS_ARTIFACTS when set (CI keeps it), else the test's temp dir.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("CTXPRESS_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// The dashboard in a real browser, against a running ctxpress after a
// scripted conversation: the table lists the conversation, the chart has
// one point per recorded turn, the current summary is shown as text, a
// new turn arrives live over the events stream, and a compaction in
// progress shows.
func TestDashboardInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("the dashboard browser test needs Debian's chromium at %s (run .ci/chromium.sh)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	up := openaitest.New(t)
	var hold atomic.Bool
	release := make(chan struct{})
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"## Goal\nFix TestParseDate on leap years.\n\n## Completed Actions\n1. Grepped dateparse for leap-year logic.\n\n## Active Task\nPatch parse.go <b>and</b> rerun the tests."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":30}}`))
	})
	st := openStoreAt(t, filepath.Join(t.TempDir(), "ctxpress.db"))
	t.Cleanup(func() { st.Close() })
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineWithShapes(), Store: st})
	a := newAgent(t, p.BaseURL(), "leap-year-fix")
	other := newAgent(t, p.BaseURL(), "another-chat")
	other.turn(false)
	const turns = 24
	compacted := 0
	for i := 0; i < turns; i++ {
		if a.turn(false).Get(HeaderCompacted) == "true" {
			compacted++
		}
	}
	if compacted == 0 {
		t.Fatal("the script did not compact")
	}
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == turns }, "the turns recorded")
	rec, _, _ := st.Get(key)
	want := rec.Branches[0]
	for _, b := range rec.Branches {
		if b.UsedAt.After(want.UsedAt) {
			want = b
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1400),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	count := func(sel string) int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
		if err != nil {
			t.Fatalf("counting %s: %v", sel, err)
		}
		return n
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.TextContent(css(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	waitCount := func(sel string, n int, what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for count(sel) != n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d × %s, want %d", what, count(sel), sel, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate(p.URL+"/ctxpress/ui"),
		chromedp.WaitVisible(css(`#conversations tbody tr`)),
		chromedp.WaitVisible(css(`#live.on`)),
	); err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#conversations tbody tr')].map(r => r.dataset.id)`))
	if err != nil {
		t.Fatal(err)
	}
	requests := text(`#t-requests`)
	if len(rows) != 2 || rows[0] != "leap-year-fix" || rows[1] != "another-chat" {
		t.Fatalf("conversations table: %q, want the two conversations, newest first", rows)
	}
	if requests != "25" {
		t.Fatalf("total requests shown: %q", requests)
	}

	if err := chromedp.Do(ctx,
		chromedp.Click(css(`#conversations tbody tr[data-id="leap-year-fix"]`)),
		chromedp.WaitVisible(css(`#chart svg`)),
	); err != nil {
		t.Fatal(err)
	}
	waitCount(`#chart circle.pt-after`, turns, "the chart after selecting")
	summary := text(`#summary`)
	if n := count(`#chart line.compaction`); n != compacted {
		t.Errorf("chart shows %d compactions, want %d", n, compacted)
	}
	if strings.TrimSpace(summary) != strings.TrimSpace(want.Summary) {
		t.Fatalf("summary shown:\n%s\nwant:\n%s", summary, want.Summary)
	}
	// The summary is text: its "<b>" is shown, not made bold.
	if count(`#summary b`) != 0 || !strings.Contains(summary, "<b>and</b>") {
		t.Fatal("the summary was rendered as markup")
	}

	// A new turn arrives live over /ctxpress/events.
	a.turn(false)
	waitCount(`#chart circle.pt-after`, turns+1, "the chart after a live turn")

	// A compaction in progress shows while the summariser works.
	hold.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.turn(false, option.WithHeader(HeaderCompact, "force"))
	}()
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(css(`#compacting`)),
		chromedp.WaitVisible(css(`#conversations .badge.compacting`)),
	); err != nil {
		t.Fatal(err)
	}
	banner := text(`#compacting`)
	if !strings.Contains(banner, "leap-year-fix") {
		t.Fatalf("compaction banner: %q", banner)
	}
	dir := artifactDir(t)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, filepath.Join(dir, "dashboard-compacting.png"), shot)
	close(release)
	<-done
	if err := chromedp.Do(ctx, chromedp.WaitNotVisible(css(`#compacting`))); err != nil {
		t.Fatal(err)
	}
	waitCount(`#chart circle.pt-after`, turns+2, "the chart after the forced compaction")
	waitCount(`#chart line.compaction`, compacted+1, "compaction markers")
	// The totals follow too (they refresh at most once a second).
	deadline := time.Now().Add(10 * time.Second)
	for text(`#t-requests`) != strconv.Itoa(turns+3) {
		if time.Now().After(deadline) {
			t.Fatalf("total requests shown %q, want %d", text(`#t-requests`), turns+3)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, filepath.Join(dir, "dashboard.png"), shot)
}

func writeArtifact(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
