package state

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// benchOpen opens each store for the benchmarks, closed when they end.
var benchOpen = []struct {
	name string
	open func(b *testing.B) Store
}{
	{"bolt", func(b *testing.B) Store {
		s, err := OpenBolt(filepath.Join(b.TempDir(), "b.db"), BoltOptions{SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"memory", func(b *testing.B) Store {
		s := NewMemoryWithOptions(MemoryOptions{SweepInterval: -1})
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"redis", func(b *testing.B) Store {
		return openTestRedis(b, sharedRedisServer(b), RedisOptions{SweepInterval: -1})
	}},
}

// historyRecord is fullRecord with MaxTurns turns: a conversation that
// has run a while, what a busy proxy reads and writes on every turn.
func historyRecord(key Key) Record {
	r := fullRecord(key)
	r.Turns = nil
	for i := range MaxTurns {
		r.AddTurn(Turn{At: t0.Add(time.Duration(i) * time.Second), TokensBefore: 90000 + i, TokensAfter: 40000 + i,
			InputTokens: 41000 + i, CachedTokens: 39000})
	}
	return r
}

// A request's store traffic, store by store, on a full record (MaxTurns
// turns): Get its record, write its turn, and both.
// go test -run '^$' -bench StoreRequest ./state/
func BenchmarkStoreRequest(b *testing.B) {
	turn := func(r *Record) error { r.AddTurn(Turn{TokensBefore: 10, TokensAfter: 7}); return nil }
	for _, bo := range benchOpen {
		b.Run(bo.name, func(b *testing.B) {
			s := bo.open(b)
			full := historyRecord(keyA)
			if _, err := s.Update(keyA, func(r *Record) error { *r = full; return nil }); err != nil {
				b.Fatal(err)
			}
			b.Run("Get", func(b *testing.B) {
				for b.Loop() {
					if _, _, err := s.Get(keyA); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Update", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.Update(keyA, turn); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("GetThenUpdate", func(b *testing.B) {
				for b.Loop() {
					if _, _, err := s.Get(keyA); err != nil {
						b.Fatal(err)
					}
					if _, err := s.Update(keyA, turn); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// The recorder's write: one UpdateMany of a batch of turns over 64 busy
// conversations (MaxTurns turns each), per turn of the batch.
// go test -run '^$' -bench StoreBatch ./state/
func BenchmarkStoreBatch(b *testing.B) {
	const conversations, batch = 64, 128
	turn := func(r *Record) error { r.AddTurn(Turn{TokensBefore: 10, TokensAfter: 7}); return nil }
	for _, bo := range benchOpen {
		b.Run(bo.name, func(b *testing.B) {
			s := bo.open(b)
			keys := make([]Key, conversations)
			for i := range keys {
				keys[i] = Key{Namespace: "bench", ID: fmt.Sprintf("conv-%02d", i)}
				full := historyRecord(keys[i])
				if _, err := s.Update(keys[i], func(r *Record) error { *r = full; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			muts := make([]Mutation, batch)
			for i := range muts {
				muts[i] = Mutation{Key: keys[i%conversations], Fn: turn}
			}
			for b.Loop() {
				if _, _, err := s.UpdateMany(muts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/turn")
		})
	}
}

// The recorder's write as the chat path makes it: one UpdateMany of one
// new turn for each of 64 busy conversations (MaxTurns turns each), per
// turn; for bolt also the bytes of pages the commit allocates per turn.
// go test -run '^$' -bench StoreTurnPerConversation -benchmem ./state/
func BenchmarkStoreTurnPerConversation(b *testing.B) {
	const conversations = 64
	turn := func(r *Record) error {
		r.AddTurn(Turn{At: time.Now(), TokensBefore: 90000, TokensAfter: 40000, InputTokens: 41000, CachedTokens: 39000})
		return nil
	}
	for _, bo := range benchOpen {
		b.Run(bo.name, func(b *testing.B) {
			s := bo.open(b)
			muts := make([]Mutation, conversations)
			for i := range muts {
				k := Key{Namespace: "bench", ID: fmt.Sprintf("conv-%02d", i)}
				full := historyRecord(k)
				if _, err := s.Update(k, func(r *Record) error { *r = full; return nil }); err != nil {
					b.Fatal(err)
				}
				muts[i] = Mutation{Key: k, Fn: turn}
			}
			var pages func() int64
			if bs, ok := asBolt(s); ok {
				pages = func() int64 { st := bs.db.Stats(); return st.TxStats.GetPageAlloc() }
			}
			var before int64
			if pages != nil {
				before = pages()
			}
			for b.Loop() {
				if _, _, err := s.UpdateMany(muts); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * conversations)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/turn")
			if pages != nil {
				b.ReportMetric(float64(pages()-before)/n, "page-B/turn")
			}
		})
	}
}
