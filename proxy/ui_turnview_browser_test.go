package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/state"
)

// turnViewShot is where TestTurnViewInBrowser also copies its screenshot,
// for people to look at.
const turnViewShot = "/tmp/ctxpress-turn-view.png"

// The turn view in a real browser: with the dashboard open, an agent's
// turns with big build logs are squashed and compacted; the turn list
// marks the compaction with its tokens before and after; opening the last
// turn shows what was done to which message (the squashed build log, by
// its tool, with its tokens as sent and as forwarded) and the request as
// the client sent it beside what was forwarded; an old turn says its
// bodies are not kept. The totals say "1 conversation", the saved tile
// says what it saved in dollars net of the cache and the summary calls,
// and the conversations table fits its card.
func TestTurnViewInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("the dashboard browser test needs Debian's chromium at %s (run .ci/chromium.sh)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	up := newChatCacheUpstream(t) // it caches prefixes and says so
	st := openStoreAt(t, filepath.Join(t.TempDir(), "ctxpress.db"))
	t.Cleanup(func() { st.Close() })
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	hosted := false
	cfg.LocalUpstream = &hosted // priced in dollars, as gpt-4o
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineWithShapes(), Store: st})

	ctx := newBrowser(t, 1600, 120*time.Second)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string { return strings.TrimSpace(textIn(t, ctx, sel)) }
	waitJS := func(js, what string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// The dashboard is open while the agent works, as a user watching it.
	if err := chromedp.Do(ctx, chromedp.Navigate(p.URL+"/ctxpress/ui"), chromedp.WaitVisible(css(`#live.on`))); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, p.BaseURL(), "leap-year-fix")
	compacted, last := runToCompaction(t, a, 2)
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(last) }, "the turns recorded")
	var show struct{ Data []admin.ConversationDetail }
	getJSON(t, p.URL+"/ctxpress/conversations/leap-year-fix?namespace="+key.Namespace, &show)
	d := show.Data[0]
	var v admin.TurnView
	getJSON(t, p.URL+"/ctxpress/conversations/leap-year-fix/turns/"+strconv.Itoa(last)+"?namespace="+key.Namespace, &v)
	var sq admin.EditInfo
	for _, e := range v.Edits {
		if e.Kind == "squashed" && e.Name == "bash" && e.TokensBefore > e.TokensAfter {
			sq = e
		}
	}
	if !v.Kept || sq.Kind == "" {
		t.Fatalf("the API keeps no squashed build log of the last turn: kept %v, edits %+v", v.Kept, v.Edits)
	}

	// The conversation is named by what the user asked, and its turns
	// list marks the compaction where it happened.
	waitJS(`document.querySelectorAll('#conversations tbody tr').length === 1`, "the conversation listed")
	if got := text(`#conversations tbody tr td.conv .title`); !strings.HasPrefix(got, "The test TestParseDate fails on leap years") {
		t.Errorf("the conversation is shown as %q", got)
	}
	click(t, ctx, `#conversations tbody tr[data-id="leap-year-fix"]`)
	waitJS(`document.querySelectorAll('#turns tbody tr').length === `+strconv.Itoa(last), "every turn listed")
	mark := d.Turns[compacted-1].Compaction
	if got, want := text(`#turns tr.compaction .badge.compaction`), fmt.Sprintf("compaction: %s → %s tokens", comma(mark.TokensBefore), comma(mark.TokensAfter)); got != want {
		t.Errorf("the compaction is marked %q, want %q", got, want)
	}
	if got := text(`#turns tr.compaction td.num`); got != strconv.Itoa(compacted) {
		t.Errorf("the compaction is marked on turn %s, want %d", got, compacted)
	}

	// The last turn: the squashed build log and its sizes, and both bodies.
	click(t, ctx, `#turns tr[data-turn="`+strconv.Itoa(last)+`"]`)
	waitJS(`!!document.querySelector('#tv-bodies .body.sent .msg.edited.squashed')`, "the turn view with its bodies")
	row := fmt.Sprintf(`#tv-edits tr[data-kind="squashed"][data-index="%d"]`, sq.Index)
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(`+jsString(row+" td")+`)].map(td => td.textContent.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"#" + strconv.Itoa(sq.Index), "bash", "squashed", comma(sq.TokensBefore), comma(sq.TokensAfter)}; len(cells) < 5 ||
		strings.Join(cells[:5], "|") != strings.Join(want, "|") {
		t.Errorf("the squashed message's row: %q, want %q", cells, want)
	}
	sentMsg := fmt.Sprintf(`#tv-bodies .body.sent .msg[data-index="%d"]`, sq.Index)
	if got := text(sentMsg + ` .head`); !strings.Contains(got, "bash") || !strings.Contains(got, comma(v.Sent.Messages[sq.Index].Bytes)+" bytes") ||
		!strings.Contains(got, "squashed") {
		t.Errorf("the squashed message as sent is headed %q", got)
	}
	if got := text(sentMsg + ` pre`); !strings.Contains(got, "INFO  compiling module") {
		t.Errorf("the squashed message as sent shows %q", got)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#tv-bodies .body.forwarded .msg.summary').length`)); err != nil || n != 1 {
		t.Errorf("the forwarded body shows %d summaries (%v), want 1", n, err)
	}
	// PNGs: the whole page, the turn list, and the turn view as a person
	// opens it (the one copied to turnViewShot).
	dir := artifactDir(t)
	page, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, filepath.Join(dir, "dashboard-turn-view.png"), page)
	for _, s := range []struct{ at, name string }{{`#detail`, "turn-list.png"}, {`#turn`, "turn-view.png"}} {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(`+jsString(s.at)+`).scrollIntoView({block: "start"}) === undefined`)); err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		writeArtifact(t, filepath.Join(dir, s.name), shot)
		if s.name == "turn-view.png" {
			writeArtifact(t, turnViewShot, shot)
		}
	}

	// The totals: one conversation, and the saved tile's sentence.
	var stats admin.Stats
	getJSON(t, p.URL+"/ctxpress/stats", &stats)
	waitJS(`document.querySelector('#t-requests').textContent === `+jsString(strconv.Itoa(last)), "the totals")
	if got := text(`#t-conversations`); got != "1 conversation" {
		t.Errorf("conversations tile: %q", got)
	}
	tile := stats.Saved
	sentence := text(`#t-money-label`) + " " + text(`#t-money`) + " " + text(`#t-money-note`)
	want := fmt.Sprintf("saved %s (net of cache and %d summary call", moneyText(stats.MoneySaved), stats.SummaryUsage.Calls)
	if sentence != tile.Label+" "+tile.Value+" "+tile.Note || !strings.HasPrefix(sentence, want) || stats.SummaryUsage.Calls == 0 {
		t.Errorf("the saved tile says %q, want %q…", sentence, want)
	}
	// The conversations table fits its card: no column past its edge.
	fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const card = document.querySelector('#conversations').closest('.panel').getBoundingClientRect();
		const state = document.querySelector('#conversations thead th:last-child').getBoundingClientRect();
		return state.right <= card.right;
	})()`))
	if err != nil || !fits {
		t.Errorf("the State column spills past its card (%v)", err)
	}

	// An old turn: its edits from the record, and why there is no body.
	click(t, ctx, `#turns tr[data-turn="1"]`)
	waitJS(`!!document.querySelector('#tv-bodies .not-kept') && document.querySelector('#tv-title').textContent === 'Turn 1'`, "the first turn's view")
	if got := text(`#tv-bodies .not-kept`); !strings.Contains(got, "not kept") {
		t.Errorf("an old turn says %q", got)
	}
	t.Logf("turn view screenshot: %s (and %s)", filepath.Join(dir, "turn-view.png"), turnViewShot)
}

// comma is n as the dashboard writes counts (toLocaleString("en-US")).
func comma(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
