package squash

import (
	"strconv"
	"strings"
)

// JSON compressor limits; doc.go explains the rules.
const (
	jsonShortString = 20  // strings this short (in characters) are kept whole
	jsonProseLimit  = 64  // low-entropy strings longer than this are cut ...
	jsonProseHead   = 32  // ... to this many characters
	jsonIDLimit     = 256 // high-entropy strings (ids, paths, URLs) are kept up to this
	jsonErrorLimit  = 400 // strings that read like an error are kept up to this
	jsonMinCut      = 16  // never cut fewer characters than this: the marker costs as much
	jsonEntropyBits = 3.0 // bits per byte from which a string without spaces is an id
	jsonTextLines   = 8   // a string of this many lines or more is a text: squashed by its shape
	arrayHead       = 3   // elements always kept at the start of a long array
	arrayLong       = 6   // arrays with more elements than this are thinned
	arrayOutliers   = 5   // shape outliers kept per array, beyond errors
)

type jkind uint8

const (
	jObj jkind = iota
	jArr
	jStr
	jLit // number, true, false, null
)

// jnode is one JSON value in a flat tree. Object children alternate key and
// value nodes.
type jnode struct {
	start, end  int // raw bytes, quotes and brackets included
	first, next int // first child and next sibling, -1 for none
	n           int // number of children
	kind        jkind
}

// squashJSON rewrites a valid JSON document compactly: every key and all
// structure stay, long low-entropy strings are cut in place, and long arrays
// keep their head, their error-looking elements and their outliers, with a
// "[N more items]" element at each gap. The result is valid JSON. An input
// that does not parse comes back unchanged.
func squashJSON(s string) string { return squashJSONText(s, nil, nil) }

// squashJSONText is squashJSON where a string of jsonTextLines lines or
// more is text (a command's output wrapped in JSON, as codex's
// {"output": …} is) and comes back as text(string), re-encoded; nil text
// cuts such strings like any other.
func squashJSONText(s string, text func(string) string, bk *back) string {
	p := jparser{s: s, nodes: make([]jnode, 0, len(s)/16+4)}
	root := p.value()
	if root < 0 {
		return s
	}
	e := jemitter{s: s, nodes: p.nodes, text: text, back: bk}
	e.b.Grow(len(s) / 2)
	e.value(root)
	return e.b.String()
}

type jparser struct {
	s     string
	i     int
	nodes []jnode
}

func (p *jparser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value parses one value at p.i and returns its node index, or -1 when the
// input is not valid JSON. Recursion depth is bounded by Detect, which only
// lets through what encoding/json.Valid accepts (nesting <= 10000).
func (p *jparser) value() int {
	p.ws()
	if p.i >= len(p.s) {
		return -1
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, jnode{start: p.i, first: -1, next: -1})
	switch c := p.s[p.i]; c {
	case '{', '[':
		kind, closer := jObj, byte('}')
		if c == '[' {
			kind, closer = jArr, ']'
		}
		p.nodes[idx].kind = kind
		p.i++
		p.ws()
		last := -1
		link := func(ch int) {
			if last < 0 {
				p.nodes[idx].first = ch
			} else {
				p.nodes[last].next = ch
			}
			last = ch
		}
		if p.i < len(p.s) && p.s[p.i] == closer {
			p.i++
			p.nodes[idx].end = p.i
			return idx
		}
		for {
			if kind == jObj {
				k := p.value()
				if k < 0 || p.nodes[k].kind != jStr {
					return -1
				}
				link(k)
				p.ws()
				if p.i >= len(p.s) || p.s[p.i] != ':' {
					return -1
				}
				p.i++
			}
			v := p.value()
			if v < 0 {
				return -1
			}
			link(v)
			p.nodes[idx].n++
			p.ws()
			if p.i >= len(p.s) {
				return -1
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] != closer {
				return -1
			}
			p.i++
			break
		}
	case '"':
		j := p.i + 1
		for {
			k := strings.IndexAny(p.s[j:], "\"\\")
			if k < 0 {
				return -1
			}
			j += k
			if p.s[j] == '\\' {
				j += 2
				continue
			}
			break
		}
		p.nodes[idx].kind = jStr
		p.i = j + 1
	default:
		j := p.i
		for j < len(p.s) && !isJSONDelim(p.s[j]) {
			j++
		}
		if j == p.i {
			return -1
		}
		p.nodes[idx].kind = jLit
		p.i = j
	}
	p.nodes[idx].end = p.i
	return idx
}

func isJSONDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ']', '}', ':', '{', '[', '"':
		return true
	}
	return false
}

type jemitter struct {
	s     string
	nodes []jnode
	b     strings.Builder
	text  func(string) string // squashes a multi-line string as text; nil: cut it as prose
	back  *back               // the first marker says the way to the whole original
	told  bool                // a marker said it
}

// tell adds the way back to the whole original to the first marker of
// the output (one is enough: they all point to the same original).
func (e *jemitter) tell() {
	if !e.told {
		e.told = true
		e.b.WriteString(e.back.whole())
	}
}

func (e *jemitter) raw(i int) string { return e.s[e.nodes[i].start:e.nodes[i].end] }

func (e *jemitter) value(i int) {
	nd := e.nodes[i]
	switch nd.kind {
	case jObj:
		e.b.WriteByte('{')
		for k := nd.first; k >= 0; {
			v := e.nodes[k].next
			if k != nd.first {
				e.b.WriteByte(',')
			}
			e.b.WriteString(e.raw(k)) // keys are always kept whole
			e.b.WriteByte(':')
			e.value(v)
			k = e.nodes[v].next
		}
		e.b.WriteByte('}')
	case jArr:
		e.array(nd)
	case jStr:
		e.str(e.raw(i))
	default:
		e.b.WriteString(e.raw(i))
	}
}

// array writes a JSON array, thinning it when it is long.
func (e *jemitter) array(nd jnode) {
	e.b.WriteByte('[')
	if nd.n <= arrayLong {
		for k := nd.first; k >= 0; k = e.nodes[k].next {
			if k != nd.first {
				e.b.WriteByte(',')
			}
			e.value(k)
		}
		e.b.WriteByte(']')
		return
	}
	elems := make([]int, 0, nd.n)
	for k := nd.first; k >= 0; k = e.nodes[k].next {
		elems = append(elems, k)
	}
	keep := e.selectElems(elems)
	wrote, gap := false, 0
	flushGap := func() {
		if gap == 0 {
			return
		}
		if wrote {
			e.b.WriteByte(',')
		}
		e.b.WriteString(`"[`)
		e.b.WriteString(strconv.Itoa(gap))
		e.b.WriteString(` more items`)
		e.tell()
		e.b.WriteString(`]"`)
		wrote, gap = true, 0
	}
	for k, el := range elems {
		if !keep[k] {
			gap++
			continue
		}
		flushGap()
		if wrote {
			e.b.WriteByte(',')
		}
		e.value(el)
		wrote = true
	}
	flushGap()
	e.b.WriteByte(']')
}

// selectElems picks the elements of a long array to keep: the first
// arrayHead, every element that looks like an error, the smallest and largest
// number, and up to arrayOutliers elements whose kind or key set differs from
// the first element's.
func (e *jemitter) selectElems(elems []int) []bool {
	keep := make([]bool, len(elems))
	for k := 0; k < arrayHead && k < len(elems); k++ {
		keep[k] = true
	}
	first := e.nodes[elems[0]]
	var sig0 uint64
	if first.kind == jObj {
		sig0 = e.keySig(first)
	}
	outliers := 0
	minK, maxK := -1, -1
	var minV, maxV float64
	for k, el := range elems {
		nd := e.nodes[el]
		if nd.kind == jLit {
			if v, err := strconv.ParseFloat(e.raw(el), 64); err == nil {
				if minK < 0 || v < minV {
					minK, minV = k, v
				}
				if maxK < 0 || v > maxV {
					maxK, maxV = k, v
				}
			}
		}
		if k < arrayHead {
			continue
		}
		if e.looksError(nd) {
			keep[k] = true
			continue
		}
		odd := nd.kind != first.kind || nd.kind == jObj && e.keySig(nd) != sig0
		if odd && outliers < arrayOutliers {
			keep[k] = true
			outliers++
		}
	}
	if minK >= 0 {
		keep[minK], keep[maxK] = true, true
	}
	return keep
}

// keySig is an order-independent hash of an object's key set.
func (e *jemitter) keySig(nd jnode) uint64 {
	var sig uint64
	for k := nd.first; k >= 0; k = e.nodes[e.nodes[k].next].next {
		sig += exactKey(e.raw(k))
	}
	return sig
}

// looksError reports whether an array element reads like an error: a string
// naming one, or an object with a non-empty "error"-like member, an error
// status ("status": "failed"), or "ok"/"success": false.
func (e *jemitter) looksError(nd jnode) bool {
	switch nd.kind {
	case jStr:
		return hasErrorWord(e.s[nd.start:min(nd.end, nd.start+1024)])
	case jObj:
		for k := nd.first; k >= 0; {
			v := e.nodes[k].next
			key := strings.Trim(e.raw(k), `"`)
			val := e.raw(v)
			switch strings.ToLower(key) {
			case "error", "errors", "err", "exception", "failure", "failures", "fault":
				switch val {
				case "null", "false", `""`, "[]", "{}", "0":
				default:
					return true
				}
			case "status", "state", "level", "severity", "result", "conclusion", "outcome":
				if e.nodes[v].kind == jStr && hasErrorWord(val) {
					return true
				}
			case "ok", "success", "passed":
				if val == "false" {
					return true
				}
			}
			k = e.nodes[v].next
		}
	}
	return false
}
