package history

import "slices"

// Edit is one thing a forwarded request did to the client's messages: a
// tool output squashed, deduplicated or pruned, a run of messages a
// summary replaced or that was cut to fit. rewrite lists them
// (Result.Edits), state keeps a bounded list with each turn
// (state.Turn.Edits) and the dashboard shows them.
type Edit struct {
	Kind EditKind
	// Index is the message's index in the client's request as sent (the
	// first of a run); Count is how many messages the edit spans: 1 for
	// one message, the run's length, or for EditMore how many edits it
	// stands for.
	Index, Count int
	// Name is the tool whose output the message carries, else the
	// message's role as sent; "" for a run.
	Name string
	// Before and After are the tokens of the message (the run) as the
	// client sent it and as forwarded; After of a summary is its block's.
	Before, After int
}

// EditKind is what an Edit did. Its values are stored (state's encoding
// of a turn): never renumber them.
type EditKind uint8

// The kinds of edits, weakest first: a message holding several tool
// results is listed once, as the strongest edit of any of them.
const (
	EditSquashed   EditKind = 1 // its tool output squashed
	EditDeduped    EditKind = 2 // sent as the dedup placeholder
	EditPruned     EditKind = 3 // sent as its one-line prune
	EditSummarised EditKind = 4 // a run a summary replaced
	EditCut        EditKind = 5 // a run left out to fit the window or the history limit
	// EditMore stands for the edits a bounded list left out (BoundEdits):
	// Count of them, Before and After their sums.
	EditMore EditKind = 6
)

// String names the kind as the admin API and the dashboard show it.
func (k EditKind) String() string {
	switch k {
	case EditSquashed:
		return "squashed"
	case EditDeduped:
		return "deduped"
	case EditPruned:
		return "pruned"
	case EditSummarised:
		return "summarised"
	case EditCut:
		return "cut"
	case EditMore:
		return "more"
	}
	return "unknown"
}

// Removed is how many tokens e took out (negative when it added some).
func (e Edit) Removed() int { return e.Before - e.After }

// BoundEdits returns es with at most n edits (n ≥ 2): when there are
// more, the n-1 that took out the most tokens, in their order, and one
// EditMore after them for the others. es itself is not changed; within
// the bound it is returned as is.
func BoundEdits(es []Edit, n int) []Edit {
	if len(es) <= n {
		return es
	}
	n = max(n, 2)
	order := make([]int, len(es))
	for i := range order {
		order[i] = i
	}
	// Largest first; ties keep the earlier message.
	slices.SortStableFunc(order, func(a, b int) int { return es[b].Removed() - es[a].Removed() })
	keep := make([]bool, len(es))
	for _, i := range order[:n-1] {
		keep[i] = true
	}
	out := make([]Edit, 0, n)
	more := Edit{Kind: EditMore}
	for i, e := range es {
		if keep[i] {
			out = append(out, e)
			continue
		}
		if more.Count == 0 {
			more.Index = e.Index
		}
		more.Count++
		if e.Kind == EditMore {
			more.Count += e.Count - 1
		}
		more.Before += e.Before
		more.After += e.After
	}
	return append(out, more)
}
