package state

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// TestStoreContract runs the behaviour every Store must have against every
// implementation.
func TestStoreContract(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range contractCases {
				t.Run(c.name, func(t *testing.T) { c.run(t, im) })
			}
		})
	}
}

var contractCases = []struct {
	name string
	run  func(t *testing.T, im impl)
}{
	{"GetMissing", testGetMissing},
	{"UpdateCreates", testUpdateCreates},
	{"RoundTripAllFields", testRoundTrip},
	{"UpdateErrorWritesNothing", testUpdateError},
	{"UpdateMany", testUpdateMany},
	{"UpdateManyStampsEachChangesTime", testUpdateManyAt},
	{"UpdateKeepsKeyAndCreatedAt", testUpdateKeepsKey},
	{"NonFiniteCalibration", testNonFiniteCalibration},
	{"Delete", testDelete},
	{"ListNewestFirstAndPaging", testListPaging},
	{"ListFilters", testListFilters},
	{"NamespaceIsolation", testNamespaceIsolation},
	{"KeyEncodingUnambiguous", testKeyEncoding},
	{"InvalidKey", testInvalidKey},
	{"BranchHelpers", testBranchHelpers},
	{"ConcurrentUpdates", testConcurrentUpdates},
	{"Sweep", testSweep},
	{"BackgroundSweep", testBackgroundSweep},
	{"CorruptRecord", testCorruptRecord},
	{"Closed", testClosed},
	{"OriginalsRoundTrip", testOriginalsRoundTrip},
	{"OriginalsNamespaceIsolation", testOriginalsNamespaces},
	{"OriginalsKeptOnce", testOriginalsKeptOnce},
	{"OriginalsBadRef", testOriginalsBadRef},
	{"OriginalsRetention", testOriginalsRetention},
	{"OriginalsBackgroundSweep", testOriginalsBackgroundSweep},
	{"OriginalsCap", testOriginalsCap},
	{"OriginalsClosed", testOriginalsClosed},
}

var (
	keyA = Key{Namespace: Namespace([]byte("Bearer sk-alice")), ID: "chat-1"}
	keyB = Key{Namespace: Namespace([]byte("Bearer sk-bob")), ID: "chat-1"}
)

func testGetMissing(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	rec, ok, err := s.Get(keyA)
	if err != nil || ok || !reflect.DeepEqual(rec, Record{}) {
		t.Fatalf("Get(missing) = %+v, %v, %v; want zero, false, nil", rec, ok, err)
	}
}

func testUpdateCreates(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	var seen Record
	got := mustUpdate(t, s, keyA, func(r *Record) error {
		seen = *r
		r.Model = "gpt-4o"
		return nil
	})
	if want := (Record{Key: keyA, CreatedAt: t0}); !reflect.DeepEqual(seen, want) {
		t.Errorf("fn saw %+v, want %+v", seen, want)
	}
	want := Record{Key: keyA, Model: "gpt-4o", CreatedAt: t0, UpdatedAt: t0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Update returned %+v, want %+v", got, want)
	}
	if rec := mustGet(t, s, keyA); !reflect.DeepEqual(rec, want) {
		t.Errorf("Get = %+v, want %+v", rec, want)
	}

	later := clock.Advance(time.Minute)
	got = mustUpdate(t, s, keyA, func(r *Record) error { r.Requests++; return nil })
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(later) || got.Requests != 1 || got.Model != "gpt-4o" {
		t.Errorf("second Update = %+v; want CreatedAt %v, UpdatedAt %v, Requests 1, model kept", got, t0, later)
	}
}

func testRoundTrip(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	want := fullRecord(keyA)
	got := mustUpdate(t, s, keyA, func(r *Record) error { *r = want; return nil })
	want.UpdatedAt = t0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Update returned\n%+v\nwant\n%+v", got, want)
	}
	if rec := mustGet(t, s, keyA); !reflect.DeepEqual(rec, want) {
		t.Errorf("Get =\n%+v\nwant\n%+v", rec, want)
	}

	// Times in another zone come back as the same instant.
	zone := time.FixedZone("X", 5*3600)
	mustUpdate(t, s, keyA, func(r *Record) error { r.Lines[0].Breaker.BackoffUntil = t0.In(zone); return nil })
	if rec := mustGet(t, s, keyA); !rec.Lines[0].Breaker.BackoffUntil.Equal(t0) {
		t.Errorf("BackoffUntil = %v, want %v", rec.Lines[0].Breaker.BackoffUntil, t0)
	}
}

func testUpdateError(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	boom := errors.New("boom")

	_, err := s.Update(keyA, func(r *Record) error { r.Requests = 99; return boom })
	if err != boom {
		t.Fatalf("Update error = %v, want fn's error as is", err)
	}
	if _, ok, _ := s.Get(keyA); ok {
		t.Fatal("a failed Update created a record")
	}

	mustUpdate(t, s, keyA, func(r *Record) error { r.Requests = 1; return nil })
	wrapped := fmt.Errorf("wrapped: %w", boom)
	if _, err := s.Update(keyA, func(r *Record) error {
		r.Requests = 99
		r.Branches = append(r.Branches, Branch{Branch: history.Branch{Summary: "x"}})
		return wrapped
	}); !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want it to wrap boom", err)
	}
	if rec := mustGet(t, s, keyA); rec.Requests != 1 || len(rec.Branches) != 0 {
		t.Fatalf("a failed Update changed the record: %+v", rec)
	}
}

func testUpdateKeepsKey(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	got := mustUpdate(t, s, keyA, func(r *Record) error {
		r.Key = keyB
		r.CreatedAt = time.Time{}
		return nil
	})
	if got.Key != keyA || got.CreatedAt.IsZero() {
		t.Errorf("Update = key %v created %v; want key %v and a creation time", got.Key, got.CreatedAt, keyA)
	}
	if _, ok, _ := s.Get(keyB); ok {
		t.Error("changing Key in fn wrote under the other key")
	}
}

func testNonFiniteCalibration(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		got := mustUpdate(t, s, keyA, func(r *Record) error {
			r.PutLine(Line{Numbers: history.Numbers{Calibration: history.Calibration{Ratio: v}}})
			return nil
		})
		if got.Lines[0].Calibration.Ratio != 0 {
			t.Errorf("Calibration %v stored as %v, want 0", v, got.Lines[0].Calibration.Ratio)
		}
	}
}

func testDelete(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	mustUpdate(t, s, keyB, func(*Record) error { return nil })
	if ok, err := s.Delete(keyA); !ok || err != nil {
		t.Fatalf("Delete(existing) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := s.Delete(keyA); ok || err != nil {
		t.Fatalf("Delete(deleted) = %v, %v; want false, nil", ok, err)
	}
	if _, ok, _ := s.Get(keyA); ok {
		t.Error("Get found a deleted record")
	}
	mustGet(t, s, keyB)
}

func ids(recs []Record) string {
	var b strings.Builder
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.Key.ID)
	}
	return b.String()
}

func testListPaging(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	if recs, err := s.List(ListOptions{}); err != nil || len(recs) != 0 {
		t.Fatalf("List(empty) = %v, %v", recs, err)
	}
	// c0..c4 updated a minute apart, then c1 touched again: newest first is
	// c1 c4 c3 c2 c0. c5 and c6 share a timestamp: ordered by id.
	for i := range 5 {
		clock.Advance(time.Minute)
		mustUpdate(t, s, Key{Namespace: "ns", ID: fmt.Sprintf("c%d", i)}, func(*Record) error { return nil })
	}
	clock.Advance(time.Minute)
	mustUpdate(t, s, Key{Namespace: "ns", ID: "c1"}, func(*Record) error { return nil })
	clock.Advance(-time.Hour)
	mustUpdate(t, s, Key{Namespace: "ns", ID: "c6"}, func(*Record) error { return nil })
	mustUpdate(t, s, Key{Namespace: "ns", ID: "c5"}, func(*Record) error { return nil })

	for _, c := range []struct {
		opts ListOptions
		want string
	}{
		{ListOptions{}, "c1,c4,c3,c2,c0,c5,c6"},
		{ListOptions{Limit: 2}, "c1,c4"},
		{ListOptions{Offset: 2, Limit: 2}, "c3,c2"},
		{ListOptions{Offset: 5}, "c5,c6"},
		{ListOptions{Offset: 7}, ""},
		{ListOptions{Offset: 100, Limit: 3}, ""},
		{ListOptions{Offset: -1, Limit: -1}, "c1,c4,c3,c2,c0,c5,c6"},
	} {
		recs, err := s.List(c.opts)
		if err != nil {
			t.Fatalf("List(%+v): %v", c.opts, err)
		}
		if got := ids(recs); got != c.want {
			t.Errorf("List(%+v) = %s, want %s", c.opts, got, c.want)
		}
	}
}

func testListFilters(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	for _, k := range []Key{
		{Namespace: "aa", ID: "x"}, {Namespace: "aa", ID: "y"},
		{Namespace: "aab", ID: "x"}, {Namespace: "a", ID: "ax"}, {Namespace: "b", ID: "x"},
	} {
		clock.Advance(time.Second)
		mustUpdate(t, s, k, func(*Record) error { return nil })
	}
	for _, c := range []struct {
		opts ListOptions
		want string // namespace/id, newest first
	}{
		{ListOptions{Namespace: "aa"}, "aa/y,aa/x"},
		{ListOptions{Namespace: "a"}, "a/ax"},
		{ListOptions{Namespace: "zz"}, ""},
		{ListOptions{ID: "x"}, "b/x,aab/x,aa/x"},
		{ListOptions{Namespace: "aab", ID: "x"}, "aab/x"},
		{ListOptions{ID: "x", Offset: 1, Limit: 1}, "aab/x"},
	} {
		recs, err := s.List(c.opts)
		if err != nil {
			t.Fatalf("List(%+v): %v", c.opts, err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.Key.String())
		}
		if g := strings.Join(got, ","); g != c.want {
			t.Errorf("List(%+v) = %s, want %s", c.opts, g, c.want)
		}
	}
}

func testNamespaceIsolation(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	mustUpdate(t, s, keyA, func(r *Record) error {
		r.PutBranch(Branch{Branch: history.Branch{Summary: "alice's secret plan", Covered: 4, Hash: hashOf("h")}}, t0)
		return nil
	})
	if _, ok, err := s.Get(keyB); ok || err != nil {
		t.Fatalf("Get with another API key's namespace = %v, %v; want nothing", ok, err)
	}
	if recs, _ := s.List(ListOptions{Namespace: keyB.Namespace}); len(recs) != 0 {
		t.Fatalf("List(namespace B) = %v; want nothing", ids(recs))
	}
	// B's first update starts from an empty record, not from A's.
	got := mustUpdate(t, s, keyB, func(r *Record) error {
		if len(r.Branches) != 0 {
			t.Errorf("B's Update saw A's branches: %+v", r.Branches)
		}
		return nil
	})
	if len(got.Branches) != 0 {
		t.Errorf("B's record has branches: %+v", got.Branches)
	}
	if ok, _ := s.Delete(Key{Namespace: keyB.Namespace, ID: keyA.ID + "x"}); ok {
		t.Error("Delete of an absent key reported true")
	}
	if rec := mustGet(t, s, keyA); len(rec.Branches) != 1 {
		t.Errorf("A's record changed: %+v", rec)
	}
}

func testKeyEncoding(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	// Keys whose plain concatenation would collide.
	keys := []Key{
		{Namespace: "ab", ID: "c"},
		{Namespace: "a", ID: "bc"},
		{Namespace: "a", ID: "b\x00c"},
		{Namespace: "a", ID: "\x00"},
		{Namespace: "a", ID: strings.Repeat("\xff", MaxIDLen)},
		{Namespace: "a", ID: "ünï/cödé id with spaces"},
	}
	for i, k := range keys {
		mustUpdate(t, s, k, func(r *Record) error { r.Requests = int64(i + 1); return nil })
	}
	for i, k := range keys {
		if rec := mustGet(t, s, k); rec.Requests != int64(i+1) || rec.Key != k {
			t.Errorf("Get(%s) = key %v requests %d; want key %v requests %d", k, rec.Key, rec.Requests, k, i+1)
		}
	}
	recs, err := s.List(ListOptions{Namespace: "a"})
	if err != nil || len(recs) != len(keys)-1 {
		t.Fatalf("List(a) = %d records, %v; want %d", len(recs), err, len(keys)-1)
	}
}

func testInvalidKey(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	for _, k := range []Key{
		{},
		{Namespace: "ns"},
		{ID: "id"},
		{Namespace: "n\x00s", ID: "id"},
		{Namespace: strings.Repeat("n", 65), ID: "id"},
		{Namespace: "ns", ID: strings.Repeat("i", MaxIDLen+1)},
	} {
		if _, _, err := s.Get(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) error = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Update(k, func(*Record) error { return nil }); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Update(%q) error = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Delete(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) error = %v, want ErrInvalidKey", k, err)
		}
	}
}

func testConcurrentUpdates(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	const workers, increments = 32, 50
	shared := Key{Namespace: "ns", ID: "shared"}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		own := Key{Namespace: "ns", ID: fmt.Sprint("own-", w)}
		wg.Go(func() {
			for range increments {
				for _, k := range []Key{shared, own} {
					if _, err := s.Update(k, func(r *Record) error {
						r.AddTurn(Turn{TokensBefore: 10, TokensAfter: 7})
						return nil
					}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rec := mustGet(t, s, shared)
	if want := int64(workers * increments); rec.Requests != want || rec.TokensBefore != 10*want || rec.TokensSaved != 3*want {
		t.Errorf("shared: requests %d, before %d, saved %d; want %d, %d, %d",
			rec.Requests, rec.TokensBefore, rec.TokensSaved, want, 10*want, 3*want)
	}
	if len(rec.Turns) != MaxTurns {
		t.Errorf("shared: %d turns kept, want %d", len(rec.Turns), MaxTurns)
	}
	for w := range workers {
		k := Key{Namespace: "ns", ID: fmt.Sprint("own-", w)}
		if rec := mustGet(t, s, k); rec.Requests != increments {
			t.Errorf("%s: requests %d, want %d", k, rec.Requests, increments)
		}
	}
}

func testSweep(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	old := Key{Namespace: "ns", ID: "old"}
	fresh := Key{Namespace: "ns", ID: "fresh"}
	mustUpdate(t, s, old, func(*Record) error { return nil })
	mustUpdate(t, s, fresh, func(*Record) error { return nil })
	clock.Advance(20 * 24 * time.Hour)
	mustUpdate(t, s, fresh, func(*Record) error { return nil }) // fresh is used again
	now := clock.Advance(15 * 24 * time.Hour)

	if n, err := s.Sweep(now.Add(-40 * 24 * time.Hour)); n != 0 || err != nil {
		t.Fatalf("Sweep(40 days) = %d, %v; want 0, nil", n, err)
	}
	if n, err := s.Sweep(now.Add(-DefaultRetention)); n != 1 || err != nil {
		t.Fatalf("Sweep(30 days) = %d, %v; want 1, nil", n, err)
	}
	if _, ok, _ := s.Get(old); ok {
		t.Error("the idle record survived the sweep")
	}
	mustGet(t, s, fresh)
	// UpdatedAt equal to the bound is not "before" it.
	if n, _ := s.Sweep(t0.Add(20 * 24 * time.Hour)); n != 0 {
		t.Errorf("Sweep(at UpdatedAt) deleted %d", n)
	}
}

func testBackgroundSweep(t *testing.T, im impl) {
	clock := newClock()
	sweeps := sweepCounter()
	s := im.open(t, testOptions{Now: clock.Now, Retention: time.Hour, SweepInterval: 5 * time.Millisecond, OnSweep: sweeps.swept})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	// The second sweep from now began after the update (the first may
	// have read the clock before it).
	sweeps.wait(sweeps.count() + 2)
	mustGet(t, s, keyA) // not idle long enough yet
	clock.Advance(time.Hour + time.Second)
	sweeps.wait(sweeps.count() + 2)
	if _, ok, err := s.Get(keyA); err != nil {
		t.Fatal(err)
	} else if ok {
		t.Fatal("the background sweep did not delete the idle record")
	}
}

func testCorruptRecord(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	good := Key{Namespace: "ns", ID: "good"}
	bad := Key{Namespace: "ns", ID: "bad"}
	mustUpdate(t, s, good, func(*Record) error { return nil })
	im.putRaw(t, s, bad, []byte("{not json"))

	if _, _, err := s.Get(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get(corrupt) error = %v, want ErrCorrupt", err)
	}
	if recs, err := s.List(ListOptions{}); err != nil || ids(recs) != "good" {
		t.Errorf("List = %s, %v; want the good record only", ids(recs), err)
	}
	if n, err := s.Sweep(time.Time{}); n != 1 || err != nil {
		t.Errorf("Sweep(zero time) = %d, %v; want the corrupt record deleted", n, err)
	}

	im.putRaw(t, s, bad, []byte("{not json"))
	rec := mustUpdate(t, s, bad, func(r *Record) error { r.Requests++; return nil })
	if rec.Requests != 1 || !rec.CreatedAt.Equal(t0) {
		t.Errorf("Update over a corrupt record = %+v; want a fresh one", rec)
	}

	// Unknown fields (a newer binary's) are ignored.
	im.putRaw(t, s, bad, []byte(`{"ns":"ns","id":"bad","requests":5,"from_the_future":{"x":1}}`))
	if rec := mustGet(t, s, bad); rec.Requests != 5 {
		t.Errorf("record with unknown fields: Requests = %d, want 5", rec.Requests)
	}
}

func testClosed(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	checks := map[string]error{}
	_, _, checks["Get"] = s.Get(keyA)
	_, checks["Update"] = s.Update(keyA, func(*Record) error { return nil })
	_, checks["Delete"] = s.Delete(keyA)
	_, checks["List"] = s.List(ListOptions{})
	_, checks["Sweep"] = s.Sweep(t0)
	for op, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
}

// UpdateMany writes every good update in one go and reports the bad ones.
func testUpdateMany(t *testing.T, im impl) {
	s := im.open(t, testOptions{})
	boom := errors.New("boom")
	inc := func(r *Record) error { r.Requests++; return nil }
	muts := []Mutation{
		{Key: keyA, Fn: inc},
		{Key: keyB, Fn: func(*Record) error { return boom }},
		{Key: Key{}, Fn: inc},
		{Key: keyA, Fn: inc},
	}
	recs, errs, err := s.UpdateMany(muts)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != boom || errs[2] == nil || errs[3] != nil {
		t.Fatalf("errs = %v", errs)
	}
	if recs[3].Requests != 2 {
		t.Fatalf("in-order updates of one key: %+v", recs[3])
	}
	if rec, ok, _ := s.Get(keyA); !ok || rec.Requests != 2 {
		t.Fatalf("keyA after UpdateMany: %+v", rec)
	}
	if _, ok, _ := s.Get(keyB); ok {
		t.Fatal("a failed mutation was written")
	}
}

// Changes gathered and written together keep when each happened (At), so
// the list stays newest first; a mutation without At gets the store's
// clock.
func testUpdateManyAt(t *testing.T, im impl) {
	clock := newClock()
	s := im.open(t, testOptions{Now: clock.Now})
	inc := func(r *Record) error { r.Requests++; return nil }
	keyC := Key{Namespace: keyA.Namespace, ID: "chat-3"}
	recs, errs, err := s.UpdateMany([]Mutation{
		{Key: keyA, Fn: inc, At: t0.Add(-3 * time.Second)},
		{Key: keyB, Fn: inc, At: t0.Add(-time.Second)},
		{Key: keyC, Fn: inc},
	})
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatal(err, errs)
	}
	for i, want := range []time.Time{t0.Add(-3 * time.Second), t0.Add(-time.Second), t0} {
		if !recs[i].UpdatedAt.Equal(want) || !recs[i].CreatedAt.Equal(want) {
			t.Errorf("mutation %d: created %v, updated %v; want both %v", i, recs[i].CreatedAt, recs[i].UpdatedAt, want)
		}
	}
	list, err := s.List(ListOptions{})
	if err != nil || len(list) != 3 || list[0].Key != keyC || list[1].Key != keyB || list[2].Key != keyA {
		ids := make([]string, len(list))
		for i, r := range list {
			ids[i] = r.Key.String()
		}
		t.Fatalf("List = %v (%v); want chat-3, bob's chat-1, alice's chat-1: newest first", ids, err)
	}
}
