package recorder

import (
	"slices"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
)

// A turn's edits go into its entry in the record, its title and agent
// into the record's (the first ask stays, the latest agent wins).
func TestAppliedTurnKeepsItsEditsTitleAndAgent(t *testing.T) {
	edits := []history.Edit{{Kind: history.EditSquashed, Index: 3, Count: 1, Name: "bash", Before: 4210, After: 380}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rec state.Record
	applyTurn(&rec, Turn{Model: "m", Edits: edits, Title: "Fix the parser", Agent: "opencode/0.15"}, t0)
	applyTurn(&rec, Turn{Model: "m", Title: "a later ask", Agent: "opencode/0.16"}, t0)
	if len(rec.Turns) != 2 || !slices.Equal(rec.Turns[0].Edits, edits) || rec.Turns[1].Edits != nil {
		t.Fatalf("turns' edits: %+v", rec.Turns)
	}
	if rec.Title != "Fix the parser" || rec.Agent != "opencode/0.16" {
		t.Fatalf("title %q, agent %q", rec.Title, rec.Agent)
	}
}
