package squash

import (
	"encoding/json"
	"strings"

	"github.com/ctxpress/ctxpress/expand"
)

// back is what the markers of one output say about getting what they
// leave out back: a shell command's rerun hint on its first gap, and, when
// ctxpress keeps originals (Config.Ways), the way to the original's lines
// on every marker. A nil *back says nothing.
type back struct {
	rerun string
	ways  *expand.Ways
	// text is the original the markers point to, tool the tool whose
	// output it is; ref is its reference once a marker needed it.
	text, tool, ref string
	// kept collects the originals a marker pointed to: the caller keeps
	// them (Result.Originals).
	kept *[]expand.Original
}

// refer returns the original's reference, noting it kept the first time.
func (k *back) refer() string {
	if k.ref == "" {
		k.ref = expand.Ref(k.text)
		*k.kept = append(*k.kept, expand.Original{Ref: k.ref, Kind: expand.KindSquash, Tool: k.tool, Text: k.text})
	}
	return k.ref
}

// gap is what the marker of the omitted lines from..to (1-based, of the
// original) adds after "omitted": the way to those lines when originals
// are kept, and the rerun hint on the first gap when the agent has no way
// of its own.
func (k *back) gap(from, to int, first bool) string {
	if k == nil {
		return ""
	}
	if k.ways == nil {
		if first {
			return k.rerun
		}
		return ""
	}
	return k.gapWith(k.refer(), from, to, first)
}

// sole is what the one marker of an output adds: the way to lines
// from..to, saying the original is intact ("" when originals are not
// kept).
func (k *back) sole(from, to int) string {
	if k == nil || k.ways == nil {
		return ""
	}
	return "; " + k.ways.Back(k.refer(), expand.Lines{From: from, To: to})
}

// wayLen is the length of what gap would add, without noting the
// original kept.
func (k *back) wayLen(from, to int, first bool) int {
	return len(k.gapWith("000000000000", from, to, first))
}

// gapWith is gap's text for an original of reference ref.
func (k *back) gapWith(ref string, from, to int, first bool) string {
	way := k.ways.Back(ref, expand.Lines{From: from, To: to})
	if !first {
		// The first marker said the original is intact; the others only
		// say where their lines are.
		way = strings.TrimPrefix(way, "original intact: ")
	}
	s := "; " + way
	if first && !k.ways.Any() {
		s += k.rerun
	}
	return s
}

// cost is what the way back adds to the budget of a kept line, with
// markerCost: half its length, as a marker comes once per run of kept
// lines, not once per line.
func (k *back) cost() int {
	if k == nil || k.ways == nil {
		return 0
	}
	return (len(k.ways.Back("000000000000", expand.Lines{From: 100, To: 200})) - len("original intact: ") + 2) / 2
}

// whole is what the first marker of a JSON output adds: the way to the
// whole original, as text inside a JSON string (escaped); "" when
// originals are not kept.
func (k *back) whole() string {
	if k == nil || k.ways == nil {
		return ""
	}
	q, _ := json.Marshal("; " + k.ways.Back(k.refer(), expand.AllLines(k.text)))
	return strings.TrimSuffix(strings.TrimPrefix(string(q), `"`), `"`)
}

// inner is the back of a text found inside this JSON output (a command's
// output wrapped in JSON): its markers point to that text, kept as an
// original of its own, so that their line numbers are its lines.
func (k *back) inner(text string) *back {
	if k == nil {
		return nil
	}
	return &back{rerun: k.rerun, ways: k.ways, text: text, tool: k.tool, kept: k.kept}
}
