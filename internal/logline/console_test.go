package logline

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// sampleEvents are events as ctxpress's loggers write them: the access
// line, a failure, compaction's nested event, awkward strings, and lines
// that are not events at all.
func sampleEvents() [][]byte {
	var out [][]byte
	add := func(f func(l zerolog.Logger)) {
		var b bytes.Buffer
		f(zerolog.New(&b).With().Str("time", "2026-12-01T20:19:24+01:00").Logger())
		out = append(out, b.Bytes())
	}
	add(func(l zerolog.Logger) {
		l.Info().Str("method", "POST").Str("path", "/v1/embeddings").Int("status", 200).
			Float64("dur", 0.412).Float64("upstream", 0.2).Int("bytes_in", 1024).Int64("bytes_out", 311).Msg("request")
	})
	add(func(l zerolog.Logger) {
		l.Warn().Str("method", "POST").Str("path", "/v1/chat/completions").Int("status", 502).
			AnErr("error", errors.New(`dial tcp 127.0.0.1:1: connect: connection refused`)).Msg("request")
	})
	add(func(l zerolog.Logger) {
		l.Info().RawJSON("event", []byte(`{"kind":"compaction","conversation":"c1","tokens":{"before":120000,"after":9000},"turns":[1,2,3]}`)).
			Bool("stream", true).Msg("compacted")
	})
	add(func(l zerolog.Logger) {
		l.Error().Str("quote", `say "hi"`).Str("tab", "a\tb").Str("unicode", "café").Str("back", `C:\x`).
			Interface("nothing", nil).Strs("list", []string{"a", "b c"}).Msg("message with \"quotes\"\nand a newline")
	})
	add(func(l zerolog.Logger) { l.Debug().Msg("") })
	add(func(l zerolog.Logger) { l.Log().Str("k", "v").Msg("no level") })
	add(func(l zerolog.Logger) { l.Trace().Str("empty", "").Msg("trace") })
	out = append(out, []byte("fasthttp: not an event\n"), []byte(`{"truncated":`+"\n"), []byte(`{"level":"info","message":"no time"}`+"\n"))
	return out
}

func TestConsoleFormatMatchesGolden(t *testing.T) {
	for _, color := range []bool{false, true} {
		name := "console.golden"
		if color {
			name = "console_color.golden"
		}
		var got []byte
		for _, ev := range sampleEvents() {
			got = AppendConsole(got, ev, color)
		}
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
		}
	}
}

func TestConsoleFieldRules(t *testing.T) {
	rows := []struct {
		rule, event, want string
	}{
		{"the time loses its zone, the level is three letters, the message follows",
			`{"level":"info","time":"2026-12-01T20:19:24Z","message":"hi"}`, "2026-12-01 20:19:24 INF hi\n"},
		{"fields keep the event's order",
			`{"level":"info","b":1,"a":2,"message":"m"}`, "INF m b=1 a=2\n"},
		{"a plain string is bare",
			`{"level":"info","path":"/v1/x"}`, "INF path=/v1/x\n"},
		{"a string with a space keeps its JSON quoting",
			`{"level":"info","s":"a b"}`, `INF s="a b"` + "\n"},
		{"a string with an escape keeps its JSON quoting",
			`{"level":"info","s":"a\nb"}`, `INF s="a\nb"` + "\n"},
		{"a nested object is its JSON text",
			`{"level":"info","event":{"a":[1,{"b":"c d"}]}}`, `INF event={"a":[1,{"b":"c d"}]}` + "\n"},
		{"an unknown level is ???",
			`{"level":"loud","message":"m"}`, "??? m\n"},
		{"a line that is not JSON is written as it is",
			"plain text\n", "plain text\n"},
	}
	for _, r := range rows {
		if got := string(AppendConsole(nil, []byte(r.event), false)); got != r.want {
			t.Errorf("%s: got %q, want %q", r.rule, got, r.want)
		}
	}
}

func TestConsoleKeepsEveryFieldOfALargeEvent(t *testing.T) {
	var b bytes.Buffer
	l := zerolog.New(&b)
	ev := l.Info()
	var want []string
	for i := range 40 {
		ev = ev.Int(fmt.Sprintf("f%02d", i), i)
		want = append(want, fmt.Sprintf("f%02d=%d", i, i))
	}
	ev.Msg("wide")
	if got, w := string(AppendConsole(nil, b.Bytes(), false)), "INF wide "+strings.Join(want, " ")+"\n"; got != w {
		t.Errorf("got %q, want %q", got, w)
	}
}
