package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/wire/responses"
)

// buildBinary builds ctxpress once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ctxpress")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBinary runs `ctxpress serve` with JSON logs and returns its base URL
// once it says it is serving.
func startBinary(t *testing.T, bin string, args ...string) (*exec.Cmd, string, *bufio.Scanner) {
	t.Helper()
	return startBinaryEnv(t, bin, nil, args...)
}

// startBinaryEnv is startBinary with env added to the environment.
func startBinaryEnv(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append(append(os.Environ(), "CTXPRESS_CONFIG="), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct{ Message, Listen string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "ctxpress serving" {
			return cmd, "http://" + line.Listen, sc
		}
	}
	t.Fatal("ctxpress exited before serving")
	return nil, "", nil
}

// The real binary serves, and on SIGTERM lets a stream in flight finish,
// then exits 0.
func TestBinaryServesAndDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	up := openaitest.New(t)
	finish := make(chan struct{})
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		<-finish
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	cmd, url, logs := startBinary(t, buildBinary(t), "--upstream", up.BaseURL())

	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "data: {\"n\":1}\n" {
		t.Fatalf("first line %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for logs.Scan() { // wait until it has begun draining
		if strings.Contains(logs.Text(), "shutting down") {
			break
		}
	}
	close(finish)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: [DONE]\n\n" {
		t.Fatalf("stream cut by SIGTERM: %q, %v", rest, err)
	}
	go func() {
		for logs.Scan() {
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ctxpress did not exit after SIGTERM")
	}
}

func TestRunUnknownCommand(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"frobnicate"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "ctxpress ") {
		t.Fatalf("version: code %d, %q", code, out.String())
	}
}

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

func TestExposureWarning(t *testing.T) {
	for _, tc := range []struct {
		addr string
		keys int
		warn bool
	}{
		{"127.0.0.1:8484", 0, false},
		{"[::1]:8484", 0, false},
		{"0.0.0.0:8484", 0, true},
		{"[::]:8484", 0, true},
		{"192.0.2.10:8484", 0, true},
		{"0.0.0.0:8484", 1, false},
	} {
		addr, _ := net.ResolveTCPAddr("tcp", tc.addr)
		msg := exposureWarning(addr, tc.keys)
		if (msg != "") != tc.warn || tc.warn && !strings.Contains(msg, "auth.keys") {
			t.Errorf("exposureWarning(%s, %d keys) = %q", tc.addr, tc.keys, msg)
		}
	}
}
