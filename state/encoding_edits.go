package state

import (
	"slices"
	"strconv"

	"github.com/ctxpress/ctxpress/history"
)

// appendEdits appends a turn's edits as integers after its nine numbers:
// how many edits, how many names, each name as its length in bytes (at
// most MaxEditName) and those bytes, then each edit as kind, index,
// count, tokens before, tokens after and its name's place among the
// names from 1 (0: none). A name is written once however many edits
// carry it: an agent's outputs are mostly one tool's. Integers, not
// strings, because an earlier version reads a turn's numbers after the
// ninth and ignores them, where a string would make it refuse the
// record; a later version's numbers after the edits are ignored alike.
func appendEdits(b []byte, es []history.Edit) []byte {
	var room [MaxTurnEdits]string
	names := room[:0]
	refs := make([]int, len(es))
	for i, e := range es {
		name := truncate(e.Name, MaxEditName)
		if name == "" {
			continue
		}
		j := slices.Index(names, name)
		if j < 0 {
			j, names = len(names), append(names, name)
		}
		refs[i] = j + 1
	}
	b = appendInts(b, len(es), len(names))
	for _, name := range names {
		b = appendInts(b, len(name))
		for i := 0; i < len(name); i++ {
			b = appendInts(b, int(name[i]))
		}
	}
	for i, e := range es {
		b = appendInts(b, int(e.Kind), e.Index, e.Count, e.Before, e.After, refs[i])
	}
	return b
}

// appendInts appends ",v" for each v.
func appendInts(b []byte, vs ...int) []byte {
	for _, v := range vs {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return b
}

// editNumbers is how many numbers an edit is.
const editNumbers = 6

// readEdits reads what appendEdits wrote, from the numbers after a turn's
// ninth; nil when there are none. Numbers that do not make the names (a
// byte out of range, a name cut short) make no edits; those that do not
// make an edit (one cut short, a name that is not there) end the list,
// and what came before them is kept.
func readEdits(v []int64) []history.Edit {
	if len(v) < 2 || v[0] <= 0 || v[1] < 0 {
		return nil
	}
	n, m := v[0], v[1]
	v = v[2:]
	var names []string
	for ; m > 0; m-- {
		if len(v) == 0 || v[0] < 0 || v[0] > MaxEditName || int64(len(v)-1) < v[0] {
			return nil
		}
		name := make([]byte, v[0])
		for i := range name {
			c := v[1+i]
			if c < 0 || c > 255 {
				return nil
			}
			name[i] = byte(c)
		}
		names = append(names, string(name))
		v = v[1+len(name):]
	}
	out := make([]history.Edit, 0, min(n, int64(len(v)/editNumbers)))
	for ; n > 0 && len(v) >= editNumbers; n-- {
		kind, ref := v[0], v[5]
		if kind < 0 || kind > 255 || ref < 0 || ref > int64(len(names)) {
			break
		}
		e := history.Edit{Kind: history.EditKind(kind), Index: int(v[1]), Count: int(v[2]), Before: int(v[3]), After: int(v[4])}
		if ref > 0 {
			e.Name = names[ref-1]
		}
		out = append(out, e)
		v = v[editNumbers:]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
