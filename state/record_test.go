package state

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/history"
)

func summaries(bs []Branch) string {
	var s []string
	for _, b := range bs {
		s = append(s, b.Summary)
	}
	return strings.Join(s, ",")
}

func TestPutBranch(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	base := func() Record {
		var r Record
		r.PutBranch(Branch{Branch: history.Branch{Summary: "a", Covered: 4, Hash: hashOf("a")}}, at(1))
		r.PutBranch(Branch{Branch: history.Branch{Summary: "b", Covered: 6, Hash: hashOf("b")}}, at(2))
		return r
	}
	cases := []struct {
		name string
		put  Branch
		want string
	}{
		{"new branch is added", Branch{Branch: history.Branch{Summary: "c", Covered: 9, Hash: hashOf("c")}}, "a,b,c"},
		{"extension replaces its parent in place", Branch{Branch: history.Branch{Summary: "a2", Covered: 9, Hash: hashOf("a2")}, Parent: hashOf("a")}, "a2,b"},
		{"same messages again replace the branch", Branch{Branch: history.Branch{Summary: "b'", Covered: 6, Hash: hashOf("b")}}, "a,b'"},
		{"unknown parent adds", Branch{Branch: history.Branch{Summary: "d", Covered: 9, Hash: hashOf("d")}, Parent: hashOf("zz")}, "a,b,d"},
		{"same hash and known parent leave one copy", Branch{Branch: history.Branch{Summary: "b2", Covered: 6, Hash: hashOf("b")}, Parent: hashOf("a")}, "b2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base()
			orig := r.Branches
			r.PutBranch(c.put, at(3))
			if got := summaries(r.Branches); got != c.want {
				t.Errorf("branches = %s, want %s", got, c.want)
			}
			if got := summaries(orig); got != "a,b" {
				t.Errorf("PutBranch changed the caller's slice: %s", got)
			}
			for _, b := range r.Branches {
				if b.Hash == c.put.Hash && (!b.UsedAt.Equal(at(3)) || !b.CreatedAt.Equal(at(3))) {
					t.Errorf("stored branch times: created %v used %v, want %v", b.CreatedAt, b.UsedAt, at(3))
				}
			}
		})
	}

	t.Run("CreatedAt kept when set", func(t *testing.T) {
		var r Record
		r.PutBranch(Branch{Branch: history.Branch{Hash: hashOf("x")}, CreatedAt: at(0)}, at(5))
		if b := r.Branches[0]; !b.CreatedAt.Equal(at(0)) || !b.UsedAt.Equal(at(5)) {
			t.Errorf("branch = %+v", b)
		}
	})
}

func TestPutBranchLRU(t *testing.T) {
	var r Record
	for i := range MaxBranches {
		r.PutBranch(Branch{Branch: history.Branch{Summary: fmt.Sprint(i), Hash: hashOf(fmt.Sprint(i))}}, t0.Add(time.Duration(i)*time.Minute))
	}
	// Use 0 and 1 again, so 2 and 3 are the least recently used.
	later := t0.Add(time.Hour)
	r.TouchBranch(hashOf("1"), later)
	r.TouchBranch(hashOf("0"), later.Add(time.Second))
	r.PutBranch(Branch{Branch: history.Branch{Summary: "8", Hash: hashOf("8")}}, later.Add(2*time.Second))
	r.PutBranch(Branch{Branch: history.Branch{Summary: "9", Hash: hashOf("9")}}, later.Add(3*time.Second))
	if got, want := summaries(r.Branches), "0,1,4,5,6,7,8,9"; got != want {
		t.Errorf("branches = %s, want %s", got, want)
	}
	if len(r.Branches) != MaxBranches {
		t.Errorf("%d branches, want %d", len(r.Branches), MaxBranches)
	}
}

func TestTouchBranch(t *testing.T) {
	var r Record
	r.PutBranch(Branch{Branch: history.Branch{Hash: hashOf("a")}}, t0)
	if r.TouchBranch(hashOf("zz"), t0.Add(time.Hour)) {
		t.Error("TouchBranch(unknown) = true")
	}
	if !r.TouchBranch(hashOf("a"), t0.Add(time.Hour)) || !r.Branches[0].UsedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("TouchBranch(a) did not update UsedAt: %+v", r.Branches[0])
	}
}

func TestMatchBranch(t *testing.T) {
	var r Record
	for _, b := range []Branch{
		{Branch: history.Branch{Summary: "short", Covered: 2, Hash: hashOf("m2")}},
		{Branch: history.Branch{Summary: "long", Covered: 8, Hash: hashOf("m8")}},
		{Branch: history.Branch{Summary: "other history", Covered: 6, Hash: hashOf("x6")}},
		{Branch: history.Branch{Summary: "mid", Covered: 5, Hash: hashOf("m5")}},
	} {
		r.PutBranch(b, t0)
	}
	// history returns the chain hashes of a request with n messages whose
	// prefixes hash to "m<k>".
	history := func(n int) func(int) (ChainHash, bool) {
		return func(k int) (ChainHash, bool) {
			if k > n {
				return ChainHash{}, false
			}
			return hashOf(fmt.Sprint("m", k)), true
		}
	}
	for _, c := range []struct {
		messages int
		want     string
	}{
		{20, "long"},
		{8, "long"},
		{7, "mid"},
		{4, "short"},
		{1, ""},
	} {
		b, ok := r.MatchBranch(history(c.messages))
		if ok != (c.want != "") || b.Summary != c.want {
			t.Errorf("%d messages: MatchBranch = %q, %v; want %q", c.messages, b.Summary, ok, c.want)
		}
	}
	var empty Record
	if _, ok := empty.MatchBranch(history(10)); ok {
		t.Error("MatchBranch on no branches = true")
	}
}

func TestAddSummaryHistory(t *testing.T) {
	var r Record
	for i := range 12 {
		r.AddSummaryHistory(SummaryEntry{Summary: fmt.Sprint(i)})
	}
	var got []string
	for _, e := range r.RecentSummaries {
		got = append(got, e.Summary)
	}
	if g := strings.Join(got, ","); g != "7,8,9,10,11" {
		t.Errorf("RecentSummaries = %s, want the last %d", g, MaxRecentSummaries)
	}
}

func TestAddTurn(t *testing.T) {
	var r Record
	for i := range MaxTurns + 50 {
		r.AddTurn(Turn{TokensBefore: 1000, TokensAfter: 600, InputTokens: i, Compacted: i%100 == 0})
	}
	r.AddTurn(Turn{TokensBefore: 500, TokensAfter: 900}) // grew: saves nothing
	n := int64(MaxTurns + 51)
	if r.Requests != n || r.TokensBefore != 1000*(n-1)+500 || r.TokensAfter != 600*(n-1)+900 {
		t.Errorf("counters: requests %d before %d after %d", r.Requests, r.TokensBefore, r.TokensAfter)
	}
	if r.TokensSaved != 400*(n-1) {
		t.Errorf("TokensSaved = %d, want %d", r.TokensSaved, 400*(n-1))
	}
	if r.Compactions != 3 {
		t.Errorf("Compactions = %d, want 3", r.Compactions)
	}
	if len(r.Turns) != MaxTurns || r.Turns[0].InputTokens != 51 || r.Turns[MaxTurns-1].TokensBefore != 500 {
		t.Errorf("Turns: %d kept, first input %d; want the last %d", len(r.Turns), r.Turns[0].InputTokens, MaxTurns)
	}
}

// AddTurn keeps at most MaxTurnEdits edits with a turn (the largest, and
// one for the rest) with names of at most MaxEditName bytes, and none for
// an empty list.
func TestAddTurnBoundsItsEdits(t *testing.T) {
	var es []history.Edit
	for i := range 3 * MaxTurnEdits {
		es = append(es, history.Edit{Kind: history.EditSquashed, Index: i, Count: 1, Name: strings.Repeat("x", 100), Before: 100 + i, After: 10})
	}
	var r Record
	r.AddTurn(Turn{Edits: es})
	r.AddTurn(Turn{Edits: []history.Edit{}})
	got := r.Turns[0].Edits
	if len(got) != MaxTurnEdits || got[MaxTurnEdits-1].Kind != history.EditMore || got[MaxTurnEdits-1].Count != 2*MaxTurnEdits+1 {
		t.Fatalf("edits kept: %+v", got)
	}
	if got[0].Index != 2*MaxTurnEdits+1 || len(got[0].Name) != MaxEditName || len(es[0].Name) != 100 {
		t.Fatalf("the largest kept, its name cut, the caller's list unchanged: %+v", got[0])
	}
	if r.Turns[1].Edits != nil {
		t.Fatalf("an empty list is kept as %#v, want nil", r.Turns[1].Edits)
	}
}

// sameTurn compares every field of a Turn: a field added to Turn and
// left out of it would make the bolt store rewrite every turn chunk.
func TestSameTurnComparesEveryField(t *testing.T) {
	base := Turn{Edits: []history.Edit{{Kind: history.EditSquashed}}}
	if !sameTurn(base, Turn{Edits: []history.Edit{{Kind: history.EditSquashed}}}) {
		t.Fatal("equal turns differ")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(7)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]history.Edit{{Kind: history.EditPruned}}))
		case reflect.Struct: // At
			f.Set(reflect.ValueOf(t0))
		default:
			t.Fatalf("field %s: no rule for %s", v.Type().Field(i).Name, f.Kind())
		}
		if sameTurn(base, other) {
			t.Errorf("turns differing in %s are the same", v.Type().Field(i).Name)
		}
	}
}

func TestRecordName(t *testing.T) {
	var r Record
	r.Name("", "")
	r.Name("Fix the parser", "opencode/0.15")
	r.Name("a later ask", "")
	r.Name("", "opencode/0.16")
	if r.Title != "Fix the parser" || r.Agent != "opencode/0.16" {
		t.Fatalf("title %q agent %q: want the first ask and the latest agent", r.Title, r.Agent)
	}
	r = Record{}
	r.Name(strings.Repeat("é", MaxTitle), "")
	if len(r.Title) > MaxTitle || !utf8.ValidString(r.Title) {
		t.Fatalf("a long title kept as %d bytes (valid UTF-8: %v)", len(r.Title), utf8.ValidString(r.Title))
	}
}

func TestAppendCappedDoesNotAlias(t *testing.T) {
	a := appendCapped([]int{1, 2, 3}, 4, 3)
	b := a[:2:3]
	_ = appendCapped(b, 9, 3)
	if fmt.Sprint(a) != "[2 3 4]" {
		t.Errorf("appendCapped wrote into its input: %v", a)
	}
}

func TestChainHashText(t *testing.T) {
	h := hashOf("abc")
	s := h.String()
	if len(s) != 64 || !strings.HasPrefix(s, "616263") {
		t.Fatalf("String = %s", s)
	}
	back, err := ParseChainHash(s)
	if err != nil || back != h {
		t.Fatalf("ParseChainHash(String) = %v, %v", back, err)
	}
	b, _ := json.Marshal(struct{ H ChainHash }{h})
	if string(b) != `{"H":"`+s+`"}` {
		t.Errorf("JSON = %s", b)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("g", 64), s + "00"} {
		if _, err := ParseChainHash(bad); err == nil {
			t.Errorf("ParseChainHash(%q) succeeded", bad)
		}
	}
	if !(ChainHash{}).IsZero() || h.IsZero() {
		t.Error("IsZero is wrong")
	}
}

// A turn added with the clock's time (monotonic reading, local zone) is
// stored to the millisecond in UTC at once, so writing the record does
// not copy its history of MaxTurns turns again to fix the one new turn
// (normalize copies a shared Turns array it must change).
func TestWritingARecordDoesNotCopyTheHistoryOfANewTurn(t *testing.T) {
	var r Record
	for range MaxTurns {
		r.AddTurn(Turn{At: time.Now().In(time.FixedZone("X", 3600)), TokensBefore: 1})
	}
	before := &r.Turns[0]
	normalize(&r)
	if &r.Turns[0] != before {
		t.Error("normalize copied the turns: the newest turn's time was not kept as stored")
	}
	if at := r.Turns[MaxTurns-1].At; at.Location() != time.UTC || at.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("the newest turn's time is %v, want UTC to the millisecond", at)
	}
}
