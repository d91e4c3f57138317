package state

import (
	"path/filepath"
	"testing"
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

// A request's store traffic, store by store, on a full record: Get its
// record, write its turn, and both.
// go test -run '^$' -bench StoreRequest ./state/
func BenchmarkStoreRequest(b *testing.B) {
	turn := func(r *Record) error { r.AddTurn(Turn{TokensBefore: 10, TokensAfter: 7}); return nil }
	for _, bo := range benchOpen {
		b.Run(bo.name, func(b *testing.B) {
			s := bo.open(b)
			full := fullRecord(keyA)
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
