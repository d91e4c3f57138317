package history

import (
	"slices"
	"testing"
)

func TestBoundEdits(t *testing.T) {
	sq := func(i, before, after int) Edit {
		return Edit{Kind: EditSquashed, Index: i, Count: 1, Name: "bash", Before: before, After: after}
	}
	sum := Edit{Kind: EditSummarised, Index: 1, Count: 30, Before: 40000, After: 900}
	for _, tc := range []struct {
		name string
		in   []Edit
		n    int
		want []Edit
	}{
		{"none: nil stays nil", nil, 4, nil},
		{"within the bound: as is", []Edit{sq(3, 900, 100), sq(5, 800, 100)}, 2, []Edit{sq(3, 900, 100), sq(5, 800, 100)}},
		{"over: the largest kept in message order, the rest summed in one",
			[]Edit{sum, sq(33, 500, 100), sq(35, 5000, 200), sq(37, 700, 100), sq(39, 300, 100)}, 3,
			[]Edit{sum, sq(35, 5000, 200), {Kind: EditMore, Index: 33, Count: 3, Before: 1500, After: 300}}},
		{"ties keep the earlier message",
			[]Edit{sq(3, 500, 100), sq(5, 500, 100), sq(7, 500, 100)}, 2,
			[]Edit{sq(3, 500, 100), {Kind: EditMore, Index: 5, Count: 2, Before: 1000, After: 200}}},
		{"a bound under two is two: one kept and what it left out",
			[]Edit{sq(3, 500, 100), sq(5, 900, 100), sq(7, 500, 100)}, 1,
			[]Edit{sq(5, 900, 100), {Kind: EditMore, Index: 3, Count: 2, Before: 1000, After: 200}}},
		{"an EditMore bounded again counts the edits it stood for",
			[]Edit{sq(3, 9000, 100), {Kind: EditMore, Index: 5, Count: 4, Before: 2000, After: 400}, sq(9, 50, 40)}, 2,
			[]Edit{sq(3, 9000, 100), {Kind: EditMore, Index: 5, Count: 5, Before: 2050, After: 440}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := BoundEdits(in, tc.n)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("BoundEdits(%d):\n got %+v\nwant %+v", tc.n, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Fatal("the input was changed")
			}
		})
	}
}

func TestEditKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := EditSquashed; k <= EditMore; k++ {
		s := k.String()
		if s == "unknown" || seen[s] {
			t.Errorf("kind %d: name %q", k, s)
		}
		seen[s] = true
	}
	if EditKind(0).String() != "unknown" {
		t.Error("the zero kind has a name")
	}
}
