//go:build !unix

package state

import "errors"

// openJournal: journals map their file, which this build does not do; the
// store runs without one (a crash loses the writer's last interval).
func openJournal(string, int, bool) (*journal, []JournalEntry, error) {
	return nil, nil, errors.ErrUnsupported
}
