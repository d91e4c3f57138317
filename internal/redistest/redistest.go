// Package redistest starts a real redis-server for tests: on 127.0.0.1, on
// a free port, without persistence, in a temporary directory. Tests that
// need one skip without the binary, unless CTXPRESS_REQUIRE_REDIS=1 (CI),
// where they fail.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// Server is a running redis-server.
type Server struct {
	cmd  *exec.Cmd
	dir  string
	Addr string        // host:port
	done chan struct{} // closed when the process has exited
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Start starts redis-server and returns once it says it accepts
// connections. ok is false when the binary is missing.
func Start() (s *Server, ok bool, err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, false, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, true, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "ctxpress-redis-")
	if err != nil {
		return nil, true, err
	}
	s = &Server{dir: dir, Addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", "")
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, true, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, true, err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		var log strings.Builder
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "Ready to accept connections") {
				said = true
				ready <- true
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = s.cmd.Wait()
		if !said {
			fmt.Fprint(os.Stderr, log.String())
			ready <- false
		}
		close(s.done)
	}()
	if !<-ready {
		return nil, true, fmt.Errorf("redis-server on port %d exited before it was ready", port)
	}
	return s, true, nil
}

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// Signal sends sig to the server (SIGSTOP: a Redis that stops answering).
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// Need starts a server of the test's own, stopped when it ends; without
// the binary the test is skipped (Skip).
func Need(t testing.TB) *Server {
	t.Helper()
	s, ok, err := Start()
	if !ok {
		Skip(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Skip skips t for want of redis-server, or fails it when
// CTXPRESS_REQUIRE_REDIS=1.
func Skip(t testing.TB) {
	t.Helper()
	if os.Getenv("CTXPRESS_REQUIRE_REDIS") == "1" {
		t.Fatal("redis-server not found and CTXPRESS_REQUIRE_REDIS=1 (apt-get install redis-server)")
	}
	t.Skip("redis-server not found: the Redis store is not tested (apt-get install redis-server)")
}
