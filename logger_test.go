package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// Started with stderr on a pipe (a container, a service manager) and no
// log option, ctxpress logs JSON, and every request's line reaches the pipe
// before the process exits on SIGTERM, though lines are buffered.
func TestDefaultLogIsJSONOffATerminalAndNoLineIsLostOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	up := openaitest.New(t)
	up.Handle("/v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	})
	cmd := exec.Command(buildBinary(t), "serve", "--listen", "127.0.0.1:0", "--upstream", up.BaseURL())
	cmd.Env = append(os.Environ(), "CTXPRESS_CONFIG=", "CTXPRESS_LOG_FORMAT=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type line struct{ Level, Message, Listen, Path string }
	lines := make(chan line, 1024)
	bad := make(chan string, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				bad <- sc.Text()
				return
			}
			lines <- l
		}
	}()
	var url string
	for l := range lines {
		if l.Message == "ctxpress serving" {
			url = "http://" + l.Listen
			break
		}
	}
	if url == "" {
		t.Fatalf("no JSON serving line; first line not JSON: %q", <-bad)
	}
	const n = 300
	for range n {
		resp, err := http.Post(url+"/v1/embeddings", "application/json", strings.NewReader(`{"model":"m","input":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	requests, last := 0, ""
	for l := range lines {
		if l.Message == "request" && l.Path == "/v1/embeddings" {
			requests++
		}
		last = l.Message
	}
	select {
	case b := <-bad:
		t.Fatalf("a line is not JSON: %q", b)
	default:
	}
	if requests != n || last != "ctxpress stopped" {
		t.Errorf("%d request lines of %d, last line %q: lines lost at exit", requests, n, last)
	}
}

func TestLogFormatRules(t *testing.T) {
	file, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rows := []struct {
		rule    string
		format  string
		out     io.Writer
		console bool
		err     bool
	}{
		{"auto writes JSON to a file", "auto", file, false, false},
		{"auto writes JSON when the output is not yet known", "auto", nil, false, false},
		{"json is JSON", "json", file, false, false},
		{"console is console anywhere, without colors off a terminal", "console", file, true, false},
		{"another format is refused", "yaml", file, false, true},
		{"an empty format is refused", "", file, false, true},
	}
	for _, r := range rows {
		s, err := logSettings(logConfig{Level: "info", Format: r.format}, r.out)
		if (err != nil) != r.err || s.options.Console != r.console || s.options.Color {
			t.Errorf("%s: got %+v, %v", r.rule, s.options, err)
		}
	}
}
