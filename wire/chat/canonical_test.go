package chat

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestCanonicalArgs(t *testing.T) {
	same := [][]string{
		{`"{\"a\":1,\"b\":2}"`, `"{\"b\":2, \"a\":1}"`, `{"b":2,"a":1}`, `{ "a" : 1 , "b" : 2 }`},
		{`"{\"p\":\"caf\\u00e9\",\"n\":{\"y\":[1,{\"z\":1,\"a\":0}],\"x\":null}}"`, `{"n":{"x":null,"y":[1,{"a":0,"z":1}]},"p":"café"}`},
		{`"{}"`, `{}`},
	}
	for _, group := range same {
		want := string(canonicalArgs(gjson.Parse(group[0])))
		for _, a := range group[1:] {
			if got := string(canonicalArgs(gjson.Parse(a))); got != want {
				t.Errorf("%s -> %s, want %s", a, got, want)
			}
		}
	}
	differ := []string{`"{\"a\":1}"`, `"{\"a\":2}"`, `"{\"A\":1}"`, `"a=1"`, `"[1,2]"`, `"[2,1]"`, `"\"x\""`, `"x"`}
	seen := map[string]string{}
	for _, a := range differ {
		c := string(canonicalArgs(gjson.Parse(a)))
		if prev, ok := seen[c]; ok {
			t.Errorf("%s and %s canonicalise equal", prev, a)
		}
		seen[c] = a
	}
	if got := string(canonicalArgs(gjson.Parse(`{"b":[true,false,null,1.5e3],"a":"x"}`))); got != `{"a":"x","b":[true,false,null,1.5e3]}` {
		t.Errorf("canonical = %s", got)
	}
}

// Hostile nesting: arguments and messages nested a million levels deep are
// canonicalised without recursing that deep (which would overflow the stack
// after hours of re-scanning), and different deep values keep different
// forms, so dedup never merges them.
func TestCanonicalDeepNesting(t *testing.T) {
	deep := func(n int, inner string) string {
		return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
	}
	a := canonicalArgs(gjson.Parse(strconv.Quote(deep(1_000_000, "1"))))
	b := canonicalArgs(gjson.Parse(strconv.Quote(deep(1_000_000, "2"))))
	if bytes.Equal(a, b) {
		t.Fatal("two different deep arguments have the same canonical form")
	}
	if !bytes.Equal(a, canonicalArgs(gjson.Parse(deep(1_000_000, "1")))) {
		t.Fatal("deep arguments as a string and as JSON differ")
	}
	shallow := canonicalArgs(gjson.Parse(`{"b": [1, 2], "a": {"y": 1, "x": 2}}`))
	if string(shallow) != `{"a":{"x":2,"y":1},"b":[1,2]}` {
		t.Fatalf("shallow arguments: %s", shallow)
	}
}
