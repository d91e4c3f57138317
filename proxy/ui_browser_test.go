package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/admin"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3/option"

	"github.com/ctxpress/ctxpress/state"
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
// new turn arrives live over the events stream, a compaction in progress
// shows, and the bill (cached share, cost, summary calls, net saved) is
// shown per conversation and in the totals as the admin API gives it.
func TestDashboardInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("the dashboard browser test needs Debian's chromium at %s (run .ci/chromium.sh)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	up := newChatCacheUpstream(t) // it caches prefixes and says so
	var hold atomic.Bool
	release := make(chan struct{})
	up.summary = "## Goal\nFix TestParseDate on leap years.\n\n## Completed Actions\n1. Grepped dateparse for leap-year logic.\n\n## Active Task\nPatch parse.go <b>and</b> rerun the tests."
	up.onSummary = func() {
		if hold.Load() {
			<-release
		}
	}
	st := openStoreAt(t, filepath.Join(t.TempDir(), "ctxpress.db"))
	t.Cleanup(func() { st.Close() })
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	hosted := false
	cfg.LocalUpstream = &hosted // priced in dollars, as gpt-4o
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineWithShapes(), Store: st})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // a failure while held must not leave Shutdown waiting on the summary
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

	ctx := newBrowser(t, 1400, 90*time.Second)

	count := func(sel string) int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
		if err != nil {
			t.Fatalf("counting %s: %v", sel, err)
		}
		return n
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string { return textIn(t, ctx, sel) }
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

	click(t, ctx, `#conversations tbody tr[data-id="leap-year-fix"]`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(css(`#chart svg`))); err != nil {
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
	if !strings.Contains(banner, "leap-year-fix") || strings.Contains(banner, " on ") {
		t.Fatalf("compaction banner of one replica: %q", banner)
	}
	// Another replica's compaction, as it comes from the shared store:
	// with two replicas heard from, each compaction names its own.
	otherReplica := func(typ string) {
		p.events.Receive([]byte(`{"origin":"elsewhere","type":"` + typ + `","event":{"type":"` + typ +
			`","conversation":"another-chat","trigger":"auto","replica":"replica-b"}}`))
	}
	otherReplica(admin.EventCompactionStarted)
	wantBanner := "leap-year-fix on " + p.cfg.Replica + ", another-chat on replica-b"
	// The page redraws when the event arrives: wait in the page for it.
	js, _ := json.Marshal(wantBanner)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#compacting").textContent.includes(`+string(js)+`)`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("compaction banner with two replicas: %q, want %q (%v)", text(`#compacting`), wantBanner, err)
	}
	dir := artifactDir(t)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, filepath.Join(dir, "dashboard-compacting.png"), shot)
	otherReplica(admin.EventCompaction)
	releaseOnce()
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
	checkBillShown(t, p, text, count)
	if shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, filepath.Join(dir, "dashboard.png"), shot)
}

// checkBillShown fails unless the dashboard shows the bill the admin API
// gives: the totals' cached share, cost with its summary calls, net saved
// and direct estimate, and the selected conversation's, in its table row
// and its facts. text reads an element's text, count counts matches.
func checkBillShown(t *testing.T, p *testProxy, text func(string) string, count func(string) int) {
	t.Helper()
	var stats admin.Stats
	getJSON(t, p.URL+"/ctxpress/stats", &stats)
	if stats.CachedShare == 0 || stats.SummaryUsage.Calls == 0 || stats.SummaryCost <= 0 || stats.CostUnit != admin.CostUSD {
		t.Fatalf("stats %+v: no cache, no summary calls or no dollars; the check proves nothing", stats)
	}
	want := map[string]string{
		`#t-cached`:     shareText(stats.CachedShare),
		`#t-cost`:       moneyText(stats.Cost),
		`#t-cost-sub`:   "incl. " + moneyText(stats.SummaryCost) + " of summary calls",
		`#t-money`:      moneyText(stats.MoneySaved),
		`#t-money-note`: fmt.Sprintf("(net of cache and %d summary calls)", stats.SummaryUsage.Calls),
		`#t-price`:      "vs. " + moneyText(stats.CostDirectEstimate) + " sent as is (estimate)",
	}
	var got struct{ Data []admin.ConversationDetail }
	getJSON(t, p.URL+"/ctxpress/conversations/leap-year-fix", &got)
	d := got.Data[0]
	row := `#conversations tbody tr[data-id="leap-year-fix"] `
	want[row+`td.cached`] = shareText(d.CachedShare)
	want[row+`td.cost`] = moneyText(d.Cost)
	want[`#d-facts [data-fact="cost"] b`] = moneyText(d.Cost)
	want[`#d-facts [data-fact="summary calls"] b`] = fmt.Sprintf("%d for %s", d.SummaryUsage.Calls, moneyText(d.SummaryCost))
	want[`#d-facts [data-fact="direct (estimate)"] b`] = moneyText(d.CostDirectEstimate)
	want[`#d-facts [data-fact="saved"] b`] = moneyText(d.MoneySaved)
	for sel, w := range want {
		if count(sel) != 1 {
			t.Errorf("%s: %d elements", sel, count(sel))
			continue
		}
		if g := strings.TrimSpace(text(sel)); g != w {
			t.Errorf("%s shows %q, want %q", sel, g, w)
		}
	}
}

// moneyText and shareText are the dashboard's money() and pct().
func moneyText(v float64) string {
	sign, a := "", math.Abs(v)
	if v < 0 {
		sign = "−"
	}
	if a >= 1 || a == 0 {
		return fmt.Sprintf("%s$%.2f", sign, a)
	}
	return fmt.Sprintf("%s$%.4f", sign, a)
}

func shareText(share float64) string { return strconv.FormatFloat(100*share, 'f', 1, 64) + "%" }

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

// newBrowser starts headless Chromium for a test, its window height
// pixels tall, and returns a context bound by within; it is stopped at
// the test's end.
func newBrowser(t *testing.T, height int, within time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, height),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancel := context.WithTimeout(ctx, within)
	t.Cleanup(func() { cancel(); cancelCtx(); cancelAlloc() })
	return ctx
}

// textIn is the text of the element sel names, waited for and read in
// one step of the page's own, for the reason click gives.
func textIn(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	js := `(() => { const e = document.querySelector(` + jsString(sel) + `); return e ? {text: e.textContent} : null })()`
	v, err := chromedp.Run(ctx, chromedp.Poll[struct {
		Text string `json:"text"`
	}](js, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return v.Text
}

// click clicks the element sel names in the page, found and clicked in
// one step of the page's own: the dashboard re-renders its tables as
// events arrive, so a node found first and clicked next may be gone.
func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	js := `(() => { const e = document.querySelector(` + jsString(sel) + `); if (!e) return false; e.click(); return true })()`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}
