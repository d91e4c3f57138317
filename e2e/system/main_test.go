package system

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// repoRoot is the module's root, the ctxpress command, from this package's
// directory (where go test runs its tests).
const repoRoot = "../.."

var (
	buildOnce sync.Once
	binDir    string // the temporary directory the binary is built into
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ctxpressBinary builds ctxpress (go build of the module's root) once per
// test binary run, on the first test that asks, and returns its path.
func ctxpressBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "ctxpress-system-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "ctxpress")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
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
