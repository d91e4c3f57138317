package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// buildCtxpress builds the ctxpress binary of the module the tool runs in.
func buildCtxpress(dir string) (string, error) {
	bin := filepath.Join(dir, "ctxpress")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/ctxpress/ctxpress")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// startCtxpress runs `ctxpress serve` on a free loopback port and returns
// the process and its base URL once its healthz answers (any log level:
// the "serving" line is info). Its log lines are counted, not kept.
func startCtxpress(bin, upstream, dir string, extra []string) (*exec.Cmd, string, *logCounter, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, "", nil, err
	}
	args := append([]string{"serve", "--listen", addr, "--upstream", upstream, "--log-format", "json"}, extra...)
	cmd := serverCommand(bin, args...)
	cmd.Env = append(os.Environ(), "CTXPRESS_CONFIG="+filepath.Join(dir, "ctxpress.yml"))
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", nil, err
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lc := &logCounter{}
	exited := make(chan struct{})
	go func() { lc.drain(sc); close(exited) }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			_ = cmd.Wait()
			return nil, "", nil, errors.New("ctxpress exited before serving")
		default:
		}
		if status, _, err := fasthttp.GetTimeout(nil, "http://"+addr+"/ctxpress/healthz", time.Second); err == nil && status == fasthttp.StatusOK {
			return cmd, "http://" + addr + "/v1", lc, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", nil, errors.New("ctxpress did not answer its healthz within 30s")
}

// freeLoopbackAddr returns a loopback address with a port nothing listens
// on now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// logCounter reads ctxpress's JSON log: it counts warnings and errors and
// keeps the first few, so a run that logged a fault says so.
type logCounter struct {
	mu     sync.Mutex
	warns  int      // guarded by mu
	errs   int      // guarded by mu
	sample []string // guarded by mu
}

func (l *logCounter) drain(sc *bufio.Scanner) {
	for sc.Scan() {
		var line struct{ Level string }
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Level != "warn" && line.Level != "error" {
			continue
		}
		l.mu.Lock()
		if line.Level == "warn" {
			l.warns++
		} else {
			l.errs++
		}
		if len(l.sample) < 5 {
			l.sample = append(l.sample, sc.Text())
		}
		l.mu.Unlock()
	}
}

func (l *logCounter) counts() (warns, errs int, sample []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warns, l.errs, append([]string(nil), l.sample...)
}

// findNginx returns the nginx binary, or "" when it is not installed.
func findNginx(flagPath string) string {
	if flagPath != "" {
		return flagPath
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// nginxConf is a plain proxy_pass to the upstream with pooled keep-alive
// connections and no buffering (streams relayed as they arrive, as ctxpress
// does). Workers: one per core, as ctxpress uses every core.
const nginxConf = `%s
worker_processes auto;
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/nginx-error.log warn;
events { worker_connections 8192; }
http {
	access_log %[2]s/nginx-access.log;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	client_max_body_size 64m;
	client_body_buffer_size 1m;
	upstream fake { server %[3]s; keepalive 256; }
	server {
		listen %[4]s;
		location / {
			proxy_pass http://fake;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_request_buffering on;
		}
	}
}
`

// startNginx runs nginx with a generated config on a free loopback port in
// front of upstreamAddr, and returns its base URL.
func startNginx(bin, dir, upstreamAddr string) (*exec.Cmd, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	user := "" // only root may (and must, to read our temp dir) name a user
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, user, dir, upstreamAddr, addr), 0o600); err != nil {
		return nil, "", err
	}
	// Stdout and stderr stay nil (/dev/null): with a pipe, Wait would wait
	// for every worker holding it too.
	cmd := serverCommand(bin, "-c", conf, "-p", dir, "-e", filepath.Join(dir, "nginx-error.log"))
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd, "http://" + addr + "/v1", nil
		}
	}
	stopNginx(cmd)
	log, _ := os.ReadFile(filepath.Join(dir, "nginx-error.log"))
	return nil, "", fmt.Errorf("nginx did not start listening: %s", log)
}

// stopNginx asks the master for a fast shutdown, which stops its workers
// too (a SIGKILL would orphan them), and waits for it.
func stopNginx(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// procMem reads VmRSS, VmHWM (peak RSS) and RssAnon of pid, in KiB.
func procMem(pid int) (rss, hwm, anon int64, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		case "RssAnon:":
			anon = v
		}
	}
	return rss, hwm, anon, nil
}

// serverCPUs, when set (-pin), are the CPUs ctxpress and nginx run on
// (taskset's list form), apart from this tool's: each side then competes
// only with itself, and a comparison moves a few percent instead of ten.
var serverCPUs string

// pinnedEnv marks the tool's own process as re-run on CPU 0.
const pinnedEnv = "CTXPRESS_LOAD_PINNED"

// pinCPUs re-runs this tool under `taskset -c 0` (the Go runtime sizes
// itself from its affinity as it starts, so it must be set before) and
// names the other CPUs for the servers. It needs at least two CPUs.
func pinCPUs() error {
	n := runtime.NumCPU()
	if os.Getenv(pinnedEnv) == "1" {
		serverCPUs = os.Getenv(pinnedEnv + "_SERVERS")
		return nil
	}
	if n < 2 {
		return errors.New("-pin needs at least two CPUs")
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return fmt.Errorf("-pin: %w", err)
	}
	env := append(os.Environ(), pinnedEnv+"=1", fmt.Sprintf("%s_SERVERS=1-%d", pinnedEnv, n-1))
	return syscall.Exec(taskset, append([]string{"taskset", "-c", "0"}, os.Args...), env)
}

// serverCommand is exec.Command for a server, on serverCPUs when set
// (taskset execs the server: the pid is the server's).
func serverCommand(bin string, args ...string) *exec.Cmd {
	if serverCPUs == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("taskset", append([]string{"-c", serverCPUs, bin}, args...)...)
}
