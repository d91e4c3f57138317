package recorder

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/state"
)

// stoppedRecorder is a recorder on store whose writer does not run: its
// turns stay queued until the test writes them (WriteQueued).
func stoppedRecorder(t testing.TB, store state.Store) *Recorder {
	t.Helper()
	return newStoppedRecorder(store, zerolog.Nop(), time.Now, nil, recordQueue, recordQueueWait, 0)
}
