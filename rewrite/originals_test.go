package rewrite

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
)

// With originals kept, each kind of replacement a body forwards (a squash,
// a dedup placeholder, a pruned line) names the reference of what it
// replaced with the configured ways, and Result.Originals holds that
// original: the text the client sent, byte-exact, once per reference; the
// next request of the history forwards the same bytes. Without a way of
// its own the replacement names the reference alone.
func TestEveryReplacementNamesItsOriginal(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent."}`
	ask := func(n int) string { return `{"role":"user","content":"ask ` + itoa(n) + `: fix the failing tests"}` }
	done := `{"role":"assistant","content":"Done."}`
	failing := miniRun(1, testLog(300, 7, 99))
	grepOut := grepLines("ServeHTTP", 120)
	grepCall := func(id string) string { return callMsg(id, "grep", jsonString(`{"pattern":"ServeHTTP","path":"."}`)) }
	msgs := []string{sys, ask(0),
		bashCall("t1", "pytest -x"), resultMsg("t1", failing), // pruned at ask(1)
		done, ask(1),
		grepCall("g1"), resultMsg("g1", grepOut), // superseded by g2: deduped
		grepCall("g2"), resultMsg("g2", grepOut+"\nreverseproxy.go:999: func (p *ReverseProxy) ServeHTTP()"),
		bashCall("t2", "pytest -x"), resultMsg("t2", failing+"\n"), // squashed
	}
	for _, ways := range []expand.Ways{{Dir: "/home/u/.cache/ctxpress/originals"}, {Tool: true}, {}} {
		cfg := pruneConfig(200)
		cfg.Expand = &ways
		cfg.Dedup.MinTokens = -1 // every superseded result, however small
		p := New(cfg)
		opening := p.RewriteWith(chat("gpt-4o", msgs[:6]...), Options{})
		in := chat("gpt-4o", msgs...)
		opts := Options{PrevPrunes: opening.Prunes, PrevDedups: opening.Dedups}
		res := p.RewriteWith(in, opts)
		checkForwarded(t, p, "request", in, res)
		parsed := Parse(chatFormat, in)
		kinds := map[string]string{}
		for _, o := range res.Originals {
			text := parsed.OriginalText(o)
			if o.Ref != expand.Ref(text) {
				t.Fatalf("%+v: the ref is not its text's", o.Original)
			}
			if prev, dup := kinds[o.Ref]; dup && prev != o.Kind {
				t.Fatalf("ref %s reported as %s and %s", o.Ref, prev, o.Kind)
			}
			kinds[o.Ref] = o.Kind
			if !strings.Contains(string(res.Body), o.Ref) {
				t.Errorf("%s original %s is not named in the body", o.Kind, o.Ref)
			}
		}
		for id, kind := range map[string]string{"t1": expand.KindPrune, "g1": expand.KindDedup, "t2": expand.KindSquash} {
			fwd := forwardedContent(res.Body, id)
			orig := forwardedContent(in, id)
			ref := expand.Ref(orig)
			if kinds[ref] != kind {
				t.Errorf("ways %+v: %s (%s) not reported as its original: %v\n%s", ways, id, kind, kinds, fwd)
			}
			if !strings.Contains(fwd, ref) {
				t.Errorf("ways %+v: %s's replacement does not name %s:\n%s", ways, id, ref, fwd)
			}
			checkNames(t, fwd, ways)
		}
		again := p.RewriteWith(chat("gpt-4o", append(msgs, done)...), Options{PrevPrunes: res.Prunes, PrevDedups: res.Dedups})
		if !extends(res.Body, again.Body) {
			t.Errorf("ways %+v: the next request does not forward the same replacements", ways)
		}
	}
}

// checkNames fails unless s names each way of w, and no other.
func checkNames(t *testing.T, s string, w expand.Ways) {
	t.Helper()
	if got := strings.Contains(s, ".txt"); got != (w.Dir != "") {
		t.Errorf("ways %+v: names a file: %v\n%s", w, got, s)
	}
	if got := strings.Contains(s, expand.ToolName); got != w.Tool {
		t.Errorf("ways %+v: names the tool: %v\n%s", w, got, s)
	}
	if !w.Any() && !regexp.MustCompile(`original kept by ctxpress as ref [0-9a-f]{12}`).MatchString(s) {
		t.Errorf("no way of the agent's own, and the ref is not named:\n%s", s)
	}
}
