package state

import (
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultMapResident is BoltOptions.MapResident when it is 0: the most of
// the db file's map a bolt store lets stay in RSS.
const DefaultMapResident int64 = 16 << 20

// mapTrimInterval is how often a bolt store compares its map's resident
// pages with the bound.
const mapTrimInterval = 10 * time.Second

// trimMapping drops the db map's pages from this process's RSS when more
// than max bytes of them are resident, and reports whether it did. The
// pages are clean (bbolt writes with pwrite, its map is read-only), so
// they stay in the page cache and the next read of one is a minor fault:
// the bound costs a fault per page touched again, never a disk read the
// kernel would not have needed anyway. It works inside a read
// transaction, which keeps bbolt from remapping meanwhile.
func (s *boltStore) trimMapping(max int64) (dropped bool, err error) {
	if fi, err := os.Stat(s.path); err != nil || fi.Size() <= max {
		return false, err // the whole file fits the bound
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		addr := tx.DB().Info().Data
		m, found, err := mappingAt(addr)
		if err != nil || !found || m.Resident <= max {
			return err
		}
		dropped = true
		return dropPages(addr, m.Mapped)
	})
	return dropped, err
}

// mapTrimmer runs trimMapping every mapTrimInterval until stopped.
type mapTrimmer struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startMapTrimmer bounds s's map to max resident bytes; nil when max < 0.
func startMapTrimmer(s *boltStore, max int64) *mapTrimmer {
	if max == 0 {
		max = DefaultMapResident
	}
	if max < 0 {
		return nil
	}
	t := &mapTrimmer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(mapTrimInterval)
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tick.C:
				if s.broken.Load() == nil {
					_, _ = s.trimMapping(max) // a failure leaves RSS as it was; the next tick tries again
				}
			}
		}
	}()
	return t
}

// Stop ends the trimmer and waits for it; a nil trimmer is stopped.
func (t *mapTrimmer) Stop() {
	if t == nil {
		return
	}
	t.once.Do(func() { close(t.stop) })
	<-t.done
}
