package recorder

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/state"
)

// journalSeqs follows which journaled turns are written or given up, for
// the mark each transaction puts: the seq up to which all of them are.
// Turns are journaled in one order and may reach the queue in another.
type journalSeqs struct {
	mu      sync.Mutex
	through uint64
	ahead   map[uint64]bool // done, past through
}

// done counts the turn journaled as seq (0: none) as written or given up,
// and returns the mark.
func (p *journalSeqs) done(seq uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.doneLocked(seq)
}

// doneAll is done for each of batch's turns, and returns the mark (the
// mark so far for a batch of none journaled).
func (p *journalSeqs) doneAll(batch []*Turn) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tr := range batch {
		p.doneLocked(tr.jseq)
	}
	return p.through
}

// doneLocked is done with mu held.
func (p *journalSeqs) doneLocked(seq uint64) uint64 {
	switch {
	case seq == p.through+1:
		p.through++
		for p.ahead[p.through+1] {
			delete(p.ahead, p.through+1)
			p.through++
		}
	case seq > p.through:
		if p.ahead == nil {
			p.ahead = map[uint64]bool{}
		}
		p.ahead[seq] = true
	}
	return p.through
}

// ReplayJournal writes to store the turns its journal holds that no
// transaction wrote (a crash's), for a process that opens the store to
// change it without serving (the conversations command): a conversation
// it forgets does not come back from the journal at the next start.
func ReplayJournal(store state.Store, log zerolog.Logger) {
	if _, ok := store.(state.Journaled); ok {
		New(store, log, time.Now, nil).Close()
	}
}

// replay writes the turns journaled before the last exit that no
// transaction wrote (a crash's), before any request is served, so that
// the requests read records with them.
func (r *Recorder) replay(entries []state.JournalEntry, through uint64) {
	r.seqs.through = through
	if len(entries) == 0 {
		return
	}
	batch := make([]*Turn, 0, len(entries))
	for _, e := range entries {
		tr, err := readJournalEntry(e.Payload)
		if err != nil {
			r.log.Warn().Uint64("seq", e.Seq).Err(err).Msg("journal entry not replayed")
			continue
		}
		tr.jseq = e.Seq
		batch = append(batch, &tr)
	}
	// One transaction, its mark through the last: none is replayed twice.
	r.writeBatch(batch, false)
	r.log.Info().Int("turns", len(batch)).Int("unreadable", len(entries)-len(batch)).
		Msg("recorded the turns answered before the last exit and not yet written (journal)")
}

// journalTurn journals tr, before its answer is sent, and returns its
// seq; 0 when the journal has no room (the turn is then kept as before
// there were journals: in memory until written).
func (r *Recorder) journalTurn(tr *Turn) uint64 {
	bp := journalBufs.Get().(*[]byte)
	*bp = appendJournalEntry((*bp)[:0], tr)
	seq, err := r.journal.Journal(*bp)
	journalBufs.Put(bp)
	if err != nil {
		r.journalWarn.Warn(r.now(), r.log, "cannot journal a turn; it is lost if ctxpress dies before it is written", err)
		return 0
	}
	return seq
}

// journalBufs are the buffers turns' entries are encoded in (the journal
// copies them).
var journalBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
