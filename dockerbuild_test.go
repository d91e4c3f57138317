package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Dockerfile's build stage, run for real outside Docker: its COPY on
// the context .dockerignore leaves, its ARG from --build-arg, its RUN
// lines, with the stage's filesystem under a temporary directory. Then the
// final stage's binary runs as the image would run it: its ENTRYPOINT and
// CMD with its ENV (on 127.0.0.1, as tests bind nothing else), and its
// HEALTHCHECK against it. The image itself (the base images, COPY --chown,
// USER) needs a Docker engine, which this machine lacks.
func TestDockerfileBuildStageBuildsTheImagesBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary as the Dockerfile does")
	}
	img := readDockerImage(t)
	ignore := readDockerignore(t)
	root := t.TempDir()
	stagePath := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	const version = "v0.0.0-dockerfile-test"
	buildArgs := map[string]string{"VERSION": version}

	// The stage's top directories, rewritten under root in RUN lines.
	tops := map[string]bool{}
	for _, in := range img.copies(t) {
		tops[topDir(strings.Fields(in.args)[0])] = true
	}
	workdir := "/"
	runEnv := os.Environ()
	for _, in := range img.build.instrs {
		switch in.cmd {
		case "WORKDIR":
			workdir = path.Join(workdir, in.args)
			tops[topDir(workdir)] = true
			if err := os.MkdirAll(stagePath(workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			f := strings.Fields(in.args)
			if in.flags["from"] != "" || len(f) < 2 {
				t.Fatalf("build stage: COPY %s is not simulated here", in.args)
			}
			dst := path.Join(workdir, f[len(f)-1])
			for _, src := range f[:len(f)-1] {
				copyFromContext(t, ignore, src, stagePath(dst))
			}
		case "ARG":
			name, def, _ := strings.Cut(in.args, "=")
			if v, ok := buildArgs[name]; ok {
				def = v
			}
			runEnv = append(runEnv, name+"="+def)
		case "ENV":
			for k, v := range img.build.env(t) {
				runEnv = append(runEnv, k+"="+v)
			}
		case "RUN":
			line := mapStagePaths(in.args, tops, root)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			cmd := exec.CommandContext(ctx, "sh", "-c", line)
			cmd.Dir, cmd.Env = stagePath(workdir), runEnv
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("RUN %s\n(as %s): %v\n%s", in.args, line, err, out)
			}
		default:
			t.Fatalf("build stage: %s is not simulated here", in.cmd)
		}
	}

	// The final stage's paths, as they come from the build stage.
	copies := img.copies(t)
	imagePath := func(p string) string {
		best := ""
		for dst := range copies {
			if (p == dst || strings.HasPrefix(p, dst+"/")) && len(dst) > len(best) {
				best = dst
			}
		}
		if best == "" {
			t.Fatalf("%s is in no directory the final stage copies from %s", p, img.build.name)
		}
		src := strings.Fields(copies[best].args)[0]
		return stagePath(path.Join(src, strings.TrimPrefix(p, best)))
	}
	for dst, in := range copies {
		if _, err := os.Stat(imagePath(dst)); err != nil {
			t.Fatalf("COPY --from=%s %s: the build stage did not make it: %v", img.build.name, in.args, err)
		}
	}

	entry := img.final.one(t, "ENTRYPOINT").execForm(t)
	bin := imagePath(entry[0])
	out, err := exec.Command(bin, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "ctxpress "+version {
		t.Fatalf("ctxpress version: %q, %v; want %q from --build-arg VERSION", out, err, "ctxpress "+version)
	}

	// The image's environment, on 127.0.0.1 and with its paths mapped.
	env := img.final.env(t)
	env["CTXPRESS_LISTEN"] = "127.0.0.1:0"
	env["CTXPRESS_DB"] = imagePath(env["CTXPRESS_DB"])
	env["CTXPRESS_LOG_FORMAT"] = "json"
	environ := func(m map[string]string) []string {
		out := []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		return out
	}
	serve := exec.Command(bin, img.final.one(t, "CMD").execForm(t)...)
	serve.Env = environ(env)
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var lines chan map[string]any
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		go func() { // the scanner may be waiting to hand over a line
			for range lines {
			}
		}()
		<-exited
	})
	lines = make(chan map[string]any, 64)
	go func() {
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			var m map[string]any
			if json.Unmarshal(s.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
		exited <- serve.Wait()
	}()
	var serving map[string]any
	for serving == nil {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before serving")
			}
			if m["message"] == "ctxpress serving" {
				serving = m
			}
		case <-time.After(time.Minute):
			t.Fatal("no \"ctxpress serving\" line within a minute")
		}
	}
	if serving["version"] != version {
		t.Fatalf("the startup line reports version %v, want %s", serving["version"], version)
	}
	listen, _ := serving["listen"].(string)
	if _, _, err := net.SplitHostPort(listen); err != nil {
		t.Fatalf("startup line: listen %q", listen)
	}
	if _, err := os.Stat(env["CTXPRESS_DB"]); err != nil {
		t.Fatalf("the db is not where the image's CTXPRESS_DB puts it: %v", err)
	}

	hc := img.final.one(t, "HEALTHCHECK")
	_, argv, _ := strings.Cut(hc.args, " ")
	check := dockerInstr{cmd: "CMD", args: strings.TrimSpace(argv)}.execForm(t)
	healthcheck := func() (int, string) {
		env := map[string]string{}
		for k, v := range img.final.env(t) {
			env[k] = v
		}
		_, port, _ := net.SplitHostPort(listen)
		// The image listens on 0.0.0.0; the check must find it on loopback.
		env["CTXPRESS_LISTEN"] = "0.0.0.0:" + port
		cmd := exec.Command(imagePath(check[0]), check[1:]...)
		cmd.Env = environ(env)
		out, err := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out) + errString(err)
	}
	if code, out := healthcheck(); code != 0 {
		t.Fatalf("HEALTHCHECK on the running server: exit %d: %s", code, out)
	}

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines { // the rest of the log, until serve exits
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not exit within a minute of SIGTERM")
	}
	if code, out := healthcheck(); code != 1 {
		t.Fatalf("HEALTHCHECK with the server stopped: exit %d: %s", code, out)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// topDir is the first element of an absolute path: /out of /out/ctxpress.
func topDir(p string) string {
	p = strings.TrimPrefix(path.Clean(p), "/")
	first, _, _ := strings.Cut(p, "/")
	return "/" + first
}

// mapStagePaths rewrites the stage's absolute paths in a shell line to the
// same paths under root.
func mapStagePaths(line string, tops map[string]bool, root string) string {
	for top := range tops {
		re := regexp.MustCompile(`(^|[\s"'=])` + regexp.QuoteMeta(top) + `(/|$|[\s"'])`)
		line = re.ReplaceAllString(line, "${1}"+filepath.ToSlash(root)+top+"${2}")
	}
	return line
}

// copyFromContext is COPY src dst from the build context: "." is the whole
// context; a single file must not be one .dockerignore leaves out.
func copyFromContext(t *testing.T, ignore dockerignore, src, dst string) {
	t.Helper()
	if path.Clean(src) == "." {
		copyContext(t, ignore, ".", dst)
		return
	}
	if ignore.excludes(path.Clean(src)) {
		t.Fatalf("COPY %s: .dockerignore leaves it out of the context", src)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, filepath.Base(src)), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
