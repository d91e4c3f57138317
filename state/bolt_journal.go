package state

import (
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// journaledBolt is a bolt store that keeps a journal: OpenBolt returns it
// as the Store, so that a writer finds Journaled only when there is one.
type journaledBolt struct{ *boltStore }

var _ Journaled = journaledBolt{}

// openJournal opens the journal beside the database, of size bytes, and
// keeps the entries its mark does not cover for Unjournaled. A database
// just created replays nothing (a journal left beside a deleted database
// is not its). On an error the store keeps none; where files cannot be
// mapped at all, it keeps none and says nothing.
func (s *boltStore) openJournal(size int, created bool) error {
	var mark uint64
	if err := s.view("open journal", func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaJournalThrough); len(v) == 8 {
			mark = binary.LittleEndian.Uint64(v)
		}
		return nil
	}); err != nil {
		return err
	}
	j, entries, err := openJournal(s.path+"-journal", size, created)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	s.through = mark
	for _, e := range entries {
		if e.Seq > mark {
			s.unjournaled = append(s.unjournaled, e)
		}
		s.through = max(s.through, e.Seq)
	}
	j.resume(s.through+1, mark)
	s.journal = j
	return nil
}

// Journal implements Journaled.
func (s journaledBolt) Journal(payload []byte) (uint64, error) {
	return s.journal.append(payload)
}

// Unjournaled implements Journaled.
func (s journaledBolt) Unjournaled() ([]JournalEntry, uint64) {
	entries := s.unjournaled
	s.unjournaled = nil
	return entries, s.through
}

// UpdateManyThrough implements Journaled.
func (s journaledBolt) UpdateManyThrough(muts []Mutation, through uint64) ([]Record, []error, error) {
	recs, errs, err := s.updateMany(muts, &through)
	if err == nil {
		s.journal.release(through)
	}
	return recs, errs, err
}
