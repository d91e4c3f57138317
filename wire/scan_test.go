package wire

import (
	"bytes"
	"strings"
	"testing"
)

// indexStringEnd is StringEnd as it was before its short-string loop: the
// reference it must equal on every input.
func indexStringEnd(b []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b)
		}
		j += q
		n := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// stringEnds are strings around shortString's length, with escapes
// (quotes, backslashes) on both sides of it, closed and not.
var stringEnds = func() (out []string) {
	for _, n := range []int{0, 1, shortString - 2, shortString - 1, shortString, shortString + 1, 3 * shortString} {
		a := strings.Repeat("a", n)
		for _, s := range []string{`"` + a + `"`, `"` + a + `\""`, `"` + a + `\\"`, `"` + a + `\\\"x"`, `"` + a + `\`, `"` + a,
			`"` + a + `\\\\"tail"`, `"\"` + a + `"`, `"` + a + `\u0022"`} {
			out = append(out, s, s+`,"next":1}`)
		}
	}
	return out
}()

func TestStringEndEndsEveryStringWhereItEnded(t *testing.T) {
	for _, s := range stringEnds {
		b := []byte(`{"k":` + s)
		if got, want := StringEnd(b, 5), indexStringEnd(b, 5); got != want {
			t.Errorf("StringEnd(%s) = %d, want %d", b, got, want)
		}
	}
}

func FuzzStringEnd(f *testing.F) {
	for _, s := range stringEnds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		if got, want := StringEnd(b, 0), indexStringEnd(b, 0); got != want {
			t.Errorf("StringEnd(%q) = %d, want %d", b, got, want)
		}
	})
}
