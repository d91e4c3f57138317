package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/wire/responses"
)

// `ctxpress squash` prints the squashed output and one stats line; `count`
// prints a number.
func TestSquashAndCountCommands(t *testing.T) {
	var in strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&in, "2026-11-29 10:00:%02d INFO worker %d finished job in 12ms\n", i%60, i)
	}
	in.WriteString("2026-11-29 10:05:00 ERROR worker 7 crashed: connection refused to db:5432\n")
	var out, errb strings.Builder
	if code := run([]string{"squash"}, strings.NewReader(in.String()), &out, &errb); code != 0 {
		t.Fatalf("squash exit %d: %s", code, errb.String())
	}
	if out.Len() >= in.Len() || !strings.Contains(out.String(), "connection refused to db:5432") {
		t.Fatalf("squash output (%d of %d bytes) lost the error or did not shrink:\n%s", out.Len(), in.Len(), out.String())
	}
	if !strings.HasPrefix(errb.String(), "shape=log bytes ") || !strings.Contains(errb.String(), "tokens ") {
		t.Fatalf("stats line: %q", errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"count", "--model", "gpt-4o"}, strings.NewReader("hello world"), &out, &errb); code != 0 || out.String() != "2\n" {
		t.Fatalf("count: exit %d, %q %q", code, out.String(), errb.String())
	}
}

// `ctxpress squash` given the call prints what the proxy forwards for that
// call's output: a file read (cat, sed -n) whole, though the same text
// without its call is squashed as a log, and --tool/--args says the same
// as --call.
func TestSquashCommandTakesTheCall(t *testing.T) {
	var in strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&in, "2026-11-29 10:00:%02d INFO worker %d finished job in 12ms\n", i%60, i)
	}
	squashCmd := func(args ...string) (string, string) {
		t.Helper()
		var out, errb strings.Builder
		if code := run(append([]string{"squash"}, args...), strings.NewReader(in.String()), &out, &errb); code != 0 {
			t.Fatalf("squash %q: exit %d: %s", args, code, errb.String())
		}
		return out.String(), errb.String()
	}
	if out, stats := squashCmd(); len(out) >= in.Len() || !strings.HasPrefix(stats, "shape=log ") {
		t.Fatalf("without a call: %d of %d bytes, %q; want it squashed as a log", len(out), in.Len(), stats)
	}
	if out, _ := squashCmd("--tool", "bash"); len(out) >= in.Len() {
		t.Fatalf("a bash call of unknown command: %d of %d bytes; want it squashed", len(out), in.Len())
	}
	for _, call := range []string{
		`{"name":"bash","arguments":{"command":"cat logs/worker.log"}}`,
		`{"name":"bash","arguments":"{\"command\": \"cd /srv && sed -n '1,300p' logs/worker.log\"}"}`,
	} {
		out, stats := squashCmd("--call", call)
		if out != in.String() || !strings.HasPrefix(stats, "shape=none ") {
			t.Errorf("--call %s: %d of %d bytes, %q; want the read whole", call, len(out), in.Len(), stats)
		}
	}
	if out, _ := squashCmd("--tool", "bash", "--args", `{"command":"cat logs/worker.log"}`); out != in.String() {
		t.Errorf("--tool bash --args cat: %d of %d bytes; want the read whole", len(out), in.Len())
	}
	var matches strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&matches, "%d:        conn.create_function(\"fn_%d\", 2, _impl)\n", 100+i, i)
	}
	grep := func(args ...string) string {
		t.Helper()
		var out, errb strings.Builder
		if code := run(append([]string{"squash"}, args...), strings.NewReader(matches.String()), &out, &errb); code != 0 {
			t.Fatalf("squash %q: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	if out := grep("--call", `{"name":"bash","arguments":{"command":"grep -n create_function base.py"}}`); out != matches.String() {
		t.Errorf("a grep -n: %d of %d bytes; want every match", len(out), matches.Len())
	}
	if out := grep(); out == matches.String() {
		t.Errorf("the same lines without their call: kept whole; want them squashed")
	}
	var errb strings.Builder
	for _, bad := range [][]string{{"--call", "cat x"}, {"--call", `{"name":"bash"}`, "--tool", "bash"}, {"--tool", "bash", "--args", "{"}} {
		if code := run(append([]string{"squash"}, bad...), strings.NewReader("x"), io.Discard, &errb); code != 2 {
			t.Errorf("squash %q: exit %d, want 2", bad, code)
		}
	}
}

// `ctxpress count` on a codex request counts it as the proxy does (its
// items, tools and instructions), not as one long text.
func TestCountCommandReadsResponsesBodies(t *testing.T) {
	body, err := os.ReadFile("internal/responsestest/testdata/codex171-exec-loop.json")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := run([]string{"count", "-"}, bytes.NewReader(body), &out, &errb); code != 0 {
		t.Fatalf("count: exit %d, %s", code, errb.String())
	}
	want := rewrite.New(rewrite.Config{Format: responses.Format{}}).Rewrite(body).TokensBefore
	if got := strings.TrimSpace(out.String()); got != strconv.Itoa(want) {
		t.Fatalf("count printed %s, the proxy estimates %d", got, want)
	}
}
