package admin

import (
	"bytes"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/state"
)

var keptT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestMatchKept(t *testing.T) {
	kt := func(sec float64, before, after int) *keptTurn {
		return &keptTurn{at: keptT0.Add(time.Duration(sec * float64(time.Second))), before: before, after: after}
	}
	turn := state.Turn{At: keptT0.Add(10 * time.Second), TokensBefore: 900, TokensAfter: 300}
	gone := kt(10, 900, 300)
	gone.gone = true
	for _, tc := range []struct {
		name string
		kept []*keptTurn
		want int
	}{
		{"none kept", nil, -1},
		{"the same numbers, a moment before the record stamped it", []*keptTurn{kt(9.999, 900, 300)}, 0},
		{"other numbers: another turn", []*keptTurn{kt(10, 900, 301)}, -1},
		{"the same numbers too long before: another turn", []*keptTurn{kt(7, 900, 300)}, -1},
		{"two with its numbers: the nearest", []*keptTurn{kt(8.5, 900, 300), kt(9.9, 900, 300), kt(11.5, 900, 300)}, 1},
		{"dropped: not kept", []*keptTurn{gone}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := matchKept(turn, tc.kept); got != tc.want {
				t.Fatalf("matchKept = %d, want %d", got, tc.want)
			}
		})
	}
}

// Kept holds the last turns of each conversation and a bounded total,
// copies the client's body (the request reuses its buffer) and keeps the
// turn's own forwarded body as is.
func TestKeptBounds(t *testing.T) {
	k := NewKept(2, 1000)
	a, b := state.Key{Namespace: "n", ID: "a"}, state.Key{Namespace: "n", ID: "b"}
	body := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	at := func(i int) time.Time { return keptT0.Add(time.Duration(i) * time.Second) }
	sent := body(100)
	k.Keep(TurnDetail{Key: a, TokensBefore: 1, Sent: sent}, at(1))
	sent[0] = 'y' // the request's buffer, reused
	if kt, ok := k.find(a, state.Turn{At: at(1), TokensBefore: 1}); !ok || kt.sent[0] != 'x' || kt.forwarded != nil {
		t.Fatal("the client's body was not copied, or a body not the turn's own was kept twice")
	}
	fwd := body(50)
	k.Keep(TurnDetail{Key: a, TokensBefore: 2, Sent: body(100), Forwarded: fwd, ForwardedOwned: true}, at(2))
	if kt, _ := k.find(a, state.Turn{At: at(2), TokensBefore: 2}); &kt.forwarded[0] != &fwd[0] {
		t.Fatal("the turn's own forwarded body was copied")
	}
	k.Keep(TurnDetail{Key: a, TokensBefore: 3, Sent: body(100)}, at(3))
	if _, ok := k.find(a, state.Turn{At: at(1), TokensBefore: 1}); ok {
		t.Fatal("a conversation keeps more than its last two turns")
	}
	if k.bytes != 250 {
		t.Fatalf("%d bytes kept, want 250", k.bytes)
	}
	// Other conversations' turns push the oldest out past the cap.
	c := state.Key{Namespace: "n", ID: "c"}
	for i, key := range []state.Key{b, b, c, c} {
		k.Keep(TurnDetail{Key: key, TokensBefore: 4 + i, Sent: body(240)}, at(4+i))
	}
	if k.bytes != 960 {
		t.Fatalf("%d bytes kept, want the four newest turns' 960", k.bytes)
	}
	if _, ok := k.find(a, state.Turn{At: at(3), TokensBefore: 3}); ok {
		t.Fatal("the oldest turns stayed past the cap")
	}
	if _, ok := k.find(b, state.Turn{At: at(4), TokensBefore: 4}); !ok {
		t.Fatal("a newer turn was dropped")
	}
	if _, ok := k.byKey[a]; ok {
		t.Fatal("a conversation with no turn kept is still listed")
	}
	k.Keep(TurnDetail{Key: b, TokensBefore: 9, Sent: body(300)}, at(9)) // over a quarter of the cap
	if _, ok := k.find(b, state.Turn{At: at(9), TokensBefore: 9}); ok {
		t.Fatal("a turn over a quarter of the cap was kept")
	}
	var none *Kept
	none.Keep(TurnDetail{Key: a, Sent: sent}, at(1))
	if _, ok := none.find(a, state.Turn{}); ok || len(none.keptOf(a, []state.Turn{{}})) != 1 {
		t.Fatal("a nil Kept")
	}
}

// Bodies are kept only while somebody looks: a dashboard following turns,
// or the admin API used within KeptWatch.
func TestAdminKeepsBodiesWhileWatched(t *testing.T) {
	now := keptT0
	a := New(Config{Clock: func() time.Time { return now }}, Deps{Events: NewBus(zerolog.Nop(), "", "r")})
	key := state.Key{Namespace: "n", ID: "c"}
	keep := func(n int) bool {
		a.Keep(TurnDetail{Key: key, TokensBefore: n, Sent: []byte("{}")})
		_, ok := a.kept.find(key, state.Turn{At: now, TokensBefore: n})
		return ok
	}
	if keep(1) {
		t.Fatal("kept while nobody ever looked")
	}
	a.kept.Watch(now.Add(KeptWatch)) // as an admin request does
	now = now.Add(KeptWatch - time.Second)
	if !keep(2) {
		t.Fatal("not kept soon after the admin API was used")
	}
	now = now.Add(2 * time.Second)
	if keep(3) {
		t.Fatal("kept long after anybody looked")
	}
	sub := a.events.subscribe(map[string]bool{EventTurn: true})
	if !keep(4) {
		t.Fatal("not kept while a dashboard follows turns")
	}
	a.events.unsubscribe(sub)
	if keep(5) {
		t.Fatal("kept after the dashboard closed")
	}
}
