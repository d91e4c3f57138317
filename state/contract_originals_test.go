package state

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/expand"
)

// sampleOriginals are texts whose bytes must come back exactly: line ends
// of both kinds, no final newline, NUL and bytes that are not UTF-8,
// nothing at all, and a large output.
func sampleOriginals() []expand.Original {
	var big strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&big, "=== RUN   TestCase%05d\n--- PASS: TestCase%05d (0.00s)\n", i, i)
	}
	return []expand.Original{
		expand.New(expand.KindSquash, "bash", "line 1\nline 2\r\n\tline 3 without a newline"),
		expand.New(expand.KindDedup, "mcp__fs__list", "\x00\xff\xfe not UTF-8: \xc3\x28 end\x00"),
		expand.New(expand.KindPrune, "", ""),
		expand.New(expand.KindSquash, "exec_command", big.String()),
	}
}

func mustGetOriginal(t *testing.T, s Store, ns, ref string) expand.Original {
	t.Helper()
	o, ok, err := s.GetOriginal(ns, ref)
	if err != nil || !ok {
		t.Fatalf("GetOriginal(%s, %s) = ok %v, err %v; want the original", ns, ref, ok, err)
	}
	return o
}

// kept reports whether s has ref in ns, failing the test on an error.
func kept(t *testing.T, s Store, ns, ref string) bool {
	t.Helper()
	_, ok, err := s.GetOriginal(ns, ref)
	if err != nil {
		t.Fatalf("GetOriginal(%s, %s): %v", ns, ref, err)
	}
	return ok
}

func testOriginalsRoundTrip(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	os := sampleOriginals()
	if err := s.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	for _, want := range os {
		if got := mustGetOriginal(t, s, keyA.Namespace, want.Ref); got != want {
			t.Errorf("GetOriginal(%s) = %q/%q, %d bytes; want %q/%q, %d bytes, byte-exact",
				want.Ref, got.Kind, got.Tool, len(got.Text), want.Kind, want.Tool, len(want.Text))
		}
		got, ok, err := s.(OriginalFinder).FindOriginal(want.Ref)
		if err != nil || !ok || got != want {
			t.Errorf("FindOriginal(%s) = ok %v, err %v, equal %v", want.Ref, ok, err, got == want)
		}
	}
	if _, ok, err := s.GetOriginal(keyA.Namespace, expand.Ref("never kept")); ok || err != nil {
		t.Errorf("GetOriginal(never kept) = %v, %v; want not found", ok, err)
	}
	if _, ok, err := s.(OriginalFinder).FindOriginal(expand.Ref("never kept")); ok || err != nil {
		t.Errorf("FindOriginal(never kept) = %v, %v; want not found", ok, err)
	}
	if err := s.PutOriginals(keyA.Namespace, nil); err != nil {
		t.Errorf("PutOriginals(none) = %v", err)
	}
}

// A reference names content, but only its own namespace's: another
// client key's lookup is not found, whatever the first one kept.
func testOriginalsNamespaces(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	secret := expand.New(expand.KindSquash, "bash", "alice's build log with her paths")
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{secret}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.GetOriginal(keyB.Namespace, secret.Ref); ok || err != nil {
		t.Fatalf("GetOriginal from another namespace = %v, %v; want not found", ok, err)
	}
	// Prefixes of one another: "aa" must not see what "a" kept.
	if err := s.PutOriginals("a", []expand.Original{secret}); err != nil {
		t.Fatal(err)
	}
	if kept(t, s, "aa", secret.Ref) || !kept(t, s, "a", secret.Ref) {
		t.Fatal(`namespace "aa" sees "a"'s original, or "a" lost it`)
	}
	// The same bytes kept by B are B's own: its sweep or eviction is not A's.
	other := secret
	other.Tool = "shell"
	if err := s.PutOriginals(keyB.Namespace, []expand.Original{other}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetOriginal(t, s, keyB.Namespace, secret.Ref); got.Tool != "shell" {
		t.Errorf("B's original: tool %q, want its own (shell)", got.Tool)
	}
	if got := mustGetOriginal(t, s, keyA.Namespace, secret.Ref); got.Tool != "bash" {
		t.Errorf("A's original: tool %q, want its own (bash)", got.Tool)
	}
}

// An original put again is kept once, as first put.
func testOriginalsKeptOnce(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	first := expand.New(expand.KindSquash, "bash", "make test\nok\n")
	again := first
	again.Kind, again.Tool = expand.KindDedup, "other"
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{first, again}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{again}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetOriginal(t, s, keyA.Namespace, first.Ref); got != first {
		t.Errorf("after putting it again: %+v, want the first put %+v", got, first)
	}
}

func testOriginalsBadRef(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	good := expand.New(expand.KindSquash, "bash", "x")
	for _, c := range []struct{ ns, ref string }{
		{keyA.Namespace, ""},
		{keyA.Namespace, "3F9A2C1B4D5E"},
		{keyA.Namespace, "3f9a2c1b4d5"},
		{keyA.Namespace, "3f9a2c1b4d5e0"},
		{keyA.Namespace, "../../etc/pw"},
		{"", good.Ref},
		{"n\x00s", good.Ref},
		{strings.Repeat("n", 65), good.Ref},
	} {
		if _, _, err := s.GetOriginal(c.ns, c.ref); !errors.Is(err, ErrBadRef) {
			t.Errorf("GetOriginal(%q, %q) error = %v, want ErrBadRef", c.ns, c.ref, err)
		}
		if err := s.PutOriginals(c.ns, []expand.Original{good, {Ref: c.ref, Text: "x"}}); !errors.Is(err, ErrBadRef) {
			t.Errorf("PutOriginals(%q, %q) error = %v, want ErrBadRef", c.ns, c.ref, err)
		}
	}
	if _, _, err := s.(OriginalFinder).FindOriginal("nope"); !errors.Is(err, ErrBadRef) {
		t.Errorf("FindOriginal(nope) error = %v, want ErrBadRef", err)
	}
	// A put with one bad reference keeps none of its originals.
	if kept(t, s, keyA.Namespace, good.Ref) {
		t.Error("a refused put kept its good original")
	}
}

// An original not put again for the retention goes with the records'
// sweep; one put again stays.
func testOriginalsRetention(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	used := expand.New(expand.KindSquash, "bash", "still in the conversation")
	idle := expand.New(expand.KindSquash, "bash", "from a conversation left long ago")
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{used, idle}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(20 * 24 * time.Hour)
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{used}); err != nil {
		t.Fatal(err)
	}
	now := clock.Advance(15 * 24 * time.Hour)
	if n, err := s.Sweep(now.Add(-40 * 24 * time.Hour)); n != 0 || err != nil {
		t.Fatalf("Sweep(40 days) = %d, %v", n, err)
	}
	if !kept(t, s, keyA.Namespace, idle.Ref) {
		t.Fatal("a sweep of 40 days removed an original put 35 days ago")
	}
	if n, err := s.Sweep(now.Add(-DefaultRetention)); n != 0 || err != nil {
		t.Fatalf("Sweep(30 days) = %d, %v; originals are not counted as records", n, err)
	}
	if kept(t, s, keyA.Namespace, idle.Ref) {
		t.Error("the original not put for 35 days survived a sweep of 30")
	}
	if !kept(t, s, keyA.Namespace, used.Ref) {
		t.Error("the original put again 15 days ago was swept")
	}
	// Swept, it is kept again when put again.
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{idle}); err != nil || !kept(t, s, keyA.Namespace, idle.Ref) {
		t.Errorf("put after the sweep: %v", err)
	}
}

func testOriginalsBackgroundSweep(t *testing.T, im impl) {
	clock := newClock()
	sweeps := sweepCounter()
	s := im.open(t, testOptions{Now: clock.Now, Retention: time.Hour, SweepInterval: 5 * time.Millisecond, OnSweep: sweeps.swept})
	o := expand.New(expand.KindPrune, "bash", "pruned output")
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	sweeps.wait(sweeps.count() + 2)
	if !kept(t, s, keyA.Namespace, o.Ref) {
		t.Fatal("swept before the retention")
	}
	clock.Advance(time.Hour + time.Second)
	sweeps.wait(sweeps.count() + 2)
	if kept(t, s, keyA.Namespace, o.Ref) {
		t.Fatal("the background sweep left an original idle past the retention")
	}
}

// Over the cap, the least recently put originals go first, whatever their
// namespace; one larger than the cap is not kept and pushes nothing out.
func testOriginalsCap(t *testing.T, im impl) {
	clock := newClock()
	text := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("x", 996) }
	var os []expand.Original
	for i := range 4 {
		os = append(os, expand.New(expand.KindSquash, "bash", text(i)))
	}
	size := originalSize(keyA.Namespace, os[0])
	s := im.open(t, testOptions{Now: clock.Now, OriginalsMaxBytes: 3*size + size/2})
	put := func(ns string, o expand.Original) {
		t.Helper()
		clock.Advance(2 * renewEvery)
		if err := s.PutOriginals(ns, []expand.Original{o}); err != nil {
			t.Fatal(err)
		}
	}
	put(keyA.Namespace, os[0])
	put(keyA.Namespace, os[1])
	put(keyB.Namespace, os[2])
	put(keyA.Namespace, os[0]) // used again: now the most recent
	put(keyB.Namespace, os[3])
	want := map[int]bool{0: true, 1: false, 2: true, 3: true}
	nss := map[int]string{0: keyA.Namespace, 1: keyA.Namespace, 2: keyB.Namespace, 3: keyB.Namespace}
	check := func(when string) {
		t.Helper()
		for i, w := range want {
			if got := kept(t, s, nss[i], os[i].Ref); got != w {
				t.Errorf("%s: original %d kept %v, want %v", when, i, got, w)
			}
		}
	}
	check("over the cap")
	huge := expand.New(expand.KindSquash, "bash", strings.Repeat("y", int(4*size)))
	put(keyA.Namespace, huge)
	if kept(t, s, keyA.Namespace, huge.Ref) {
		t.Error("an original larger than the cap was kept")
	}
	check("after one larger than the cap")
}

func testOriginalsClosed(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	o := expand.New(expand.KindSquash, "bash", "x")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, getErr := s.GetOriginal(keyA.Namespace, o.Ref)
	_, _, findErr := s.(OriginalFinder).FindOriginal(o.Ref)
	for op, err := range map[string]error{
		"PutOriginals": s.PutOriginals(keyA.Namespace, []expand.Original{o}),
		"GetOriginal":  getErr,
		"FindOriginal": findErr,
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
}
