package system

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

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
	cmd, url, logs := startBinary(t, ctxpressBinary(t), "--upstream", up.BaseURL(), "--db", filepath.Join(t.TempDir(), "ctxpress.db"))

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
	cmd := exec.Command(ctxpressBinary(t), "serve", "--listen", "127.0.0.1:0", "--upstream", up.BaseURL(), "--db", filepath.Join(t.TempDir(), "ctxpress.db"))
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
