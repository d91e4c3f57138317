package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

func testBranchHelpers(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	// Ten compactions from scratch, each a new branch: the two least recently
	// used go, except branch 0, which a request used in between.
	for i := range 10 {
		now := clock.Advance(time.Minute)
		mustUpdate(t, s, keyA, func(r *Record) error {
			r.PutBranch(Branch{Branch: history.Branch{Summary: fmt.Sprint("s", i), Covered: 10 + i, Hash: hashOf(fmt.Sprint("h", i))}}, now)
			if i == 7 && !r.TouchBranch(hashOf("h0"), now) {
				t.Error("TouchBranch(h0) = false")
			}
			r.AddSummaryHistory(SummaryEntry{At: now, Summary: fmt.Sprint("s", i), CoveredMessages: 10 + i})
			return nil
		})
	}
	rec := mustGet(t, s, keyA)
	var have []string
	for _, b := range rec.Branches {
		have = append(have, b.Summary)
	}
	if got, want := strings.Join(have, ","), "s0,s3,s4,s5,s6,s7,s8,s9"; got != want {
		t.Errorf("branches = %s, want %s", got, want)
	}
	if len(rec.RecentSummaries) != MaxRecentSummaries || rec.RecentSummaries[0].Summary != "s5" || rec.RecentSummaries[4].Summary != "s9" {
		t.Errorf("RecentSummaries = %+v, want s5..s9", rec.RecentSummaries)
	}

	// Extending s9 replaces it.
	now := clock.Advance(time.Minute)
	rec = mustUpdate(t, s, keyA, func(r *Record) error {
		r.PutBranch(Branch{Branch: history.Branch{Summary: "s9+", Covered: 30, Hash: hashOf("h9+")}, Parent: hashOf("h9")}, now)
		return nil
	})
	if len(rec.Branches) != MaxBranches {
		t.Fatalf("after extending: %d branches, want %d", len(rec.Branches), MaxBranches)
	}
	b, ok := rec.MatchBranch(func(n int) (ChainHash, bool) {
		switch n {
		case 30:
			return hashOf("h9+"), true
		case 19:
			return hashOf("h9"), true
		}
		return ChainHash{}, false
	})
	if !ok || b.Summary != "s9+" || !b.UsedAt.Equal(now) || b.Parent != hashOf("h9") {
		t.Errorf("MatchBranch = %+v, %v; want s9+ used at %v", b, ok, now)
	}

	// A prepared extension is stored beside its parent, which requests go
	// on sending, and replaces it only once promoted; it survives the store.
	now = clock.Advance(time.Minute)
	mustUpdate(t, s, keyA, func(r *Record) error {
		r.PutBranch(Branch{Branch: history.Branch{Summary: "s9++", Covered: 40, Hash: hashOf("h9++")}, Parent: hashOf("h9+"), Prepared: true}, now)
		return nil
	})
	rec = mustGet(t, s, keyA)
	if got := summariesOf(rec); !strings.Contains(got, "s9+,") || !strings.Contains(got, "s9++") {
		t.Errorf("after preparing: branches %s, want s9+ kept beside s9++", got)
	}
	if i := slices.IndexFunc(rec.Branches, func(b Branch) bool { return b.Summary == "s9++" }); i < 0 || !rec.Branches[i].Prepared {
		t.Errorf("the prepared branch did not come back prepared: %+v", rec.Branches)
	}
	rec = mustUpdate(t, s, keyA, func(r *Record) error {
		if r.PromoteBranch(hashOf("h9+"), now) {
			t.Error("PromoteBranch of a branch that is not prepared = true")
		}
		if !r.PromoteBranch(hashOf("h9++"), now) {
			t.Error("PromoteBranch(h9++) = false")
		}
		return nil
	})
	if got := summariesOf(rec); strings.Contains(got, "s9+,") || !strings.Contains(got, "s9++") || len(rec.Branches) != MaxBranches-1 {
		t.Errorf("after promoting: branches %s, want s9++ in place of s9+", got)
	}
	for _, b := range rec.Branches {
		if b.Prepared {
			t.Errorf("branch %s still prepared after promotion", b.Summary)
		}
	}
}

func summariesOf(r Record) string {
	var have []string
	for _, b := range r.Branches {
		have = append(have, b.Summary)
	}
	return strings.Join(have, ",") + ","
}
