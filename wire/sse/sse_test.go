package sse

import (
	"reflect"
	"strings"
	"testing"
)

func TestLineReaderCutsLinesWhereverReadsSplitThem(t *testing.T) {
	for _, stream := range []string{
		"event: a\ndata: 1\n\ndata: 2\n\n",
		"event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
		"event: a\rdata: 1\r\rdata: 2\r\r",
		"event: a\r\ndata: 1\n\rdata: 2\r\n\n",
	} {
		want := []string{"event: a", "data: 1", "", "data: 2", ""}
		for cut := 0; cut <= len(stream); cut++ {
			var r LineReader
			var got []string
			add := func(l []byte) { got = append(got, string(l)) }
			r.Feed([]byte(stream[:cut]), add)
			r.Feed([]byte(stream[cut:]), add)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q cut at %d: lines %q, want %q", stream, cut, got, want)
			}
		}
	}
}

func TestLineReaderSkipsAnOverlongLine(t *testing.T) {
	var r LineReader
	var got []string
	add := func(l []byte) { got = append(got, string(l)) }
	r.Feed([]byte("data: "+strings.Repeat("x", MaxLine+10)), add)
	r.Feed([]byte("\ndata: ok\n"), add)
	if !reflect.DeepEqual(got, []string{"data: ok"}) || len(r.partial) > 0 {
		t.Fatalf("lines %q, partial %d", got, len(r.partial))
	}
}

func TestEventData(t *testing.T) {
	for ev, want := range map[string]string{
		"event: x\ndata: {\"a\":1}\n\n": `{"a":1}`,
		"data:one\r\ndata: two\r\n\r\n": "one\ntwo",
		": comment\n\n":                 "",
	} {
		if got := string(EventData([]byte(ev))); got != want {
			t.Errorf("EventData(%q) = %q, want %q", ev, got, want)
		}
	}
}
