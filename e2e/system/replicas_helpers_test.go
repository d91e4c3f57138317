package system

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/tidwall/gjson"
)

// nginxBinary finds Debian's nginx (in /usr/sbin, often not on a test
// user's PATH). Without it the test is skipped, unless
// CTXPRESS_REQUIRE_NGINX=1 (CI, where .ci/nginx.sh installs it).
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("CTXPRESS_REQUIRE_NGINX") == "1" {
		t.Fatal("nginx not found and CTXPRESS_REQUIRE_NGINX=1 (apt-get install nginx)")
	}
	t.Skip("nginx not found: the replicas behind a load balancer are not tested (apt-get install nginx)")
	return ""
}

// nginxConf is a round-robin load balancer of backends listening on
// port, everything under dir: what deploy/nginx.conf does in compose. A
// backend that refuses the connection or times out gets the request's
// next try on the other one (proxy_next_upstream); a POST already sent to
// a backend that dies is not resent (nginx's rule for non-idempotent
// methods): its client gets a 502 and retries.
func nginxConf(dir string, port int, backends []string) string {
	var servers strings.Builder
	for _, b := range backends {
		fmt.Fprintf(&servers, "    server %s;\n", b)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // as root, workers would run as nobody, who cannot write to dir
	}
	return user + fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp/body;
  proxy_temp_path %[1]s/tmp/proxy;
  fastcgi_temp_path %[1]s/tmp/fastcgi;
  uwsgi_temp_path %[1]s/tmp/uwsgi;
  scgi_temp_path %[1]s/tmp/scgi;
  upstream ctxpress {
%[3]s    keepalive 16;
  }
  server {
    listen 127.0.0.1:%[2]d;
    client_max_body_size 64m;
    client_body_buffer_size 1m;
    location / {
      proxy_pass http://ctxpress;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_next_upstream error timeout;
      proxy_buffering off;
      proxy_read_timeout 10m;
      proxy_send_timeout 10m;
    }
  }
}
`, dir, port, servers.String())
}

// startNginx runs nginx as the test user in front of backends (host:port)
// and returns its base URL once its port accepts connections.
func startNginx(t *testing.T, backends ...string) string {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, port, backends)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off;")
	out, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out // files: Wait does not wait on a worker holding a pipe
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the master stops its workers (SIGKILL would orphan them)
		<-exited
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error.log:\n%s", log)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	awaitCond(t, "nginx listening on "+addr, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			stderr, _ := os.ReadFile(out.Name())
			t.Fatalf("nginx exited: %s\n%s", stderr, log)
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// awaitCond polls cond, a readiness probe, until it holds; the deadline
// is a deadlock guard, not a timing bound.
func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never got %s", what)
		}
		<-tick.C
	}
}

// replicaUpstream is a strict chat-completions upstream for several
// ctxpress replicas, each given its own base path ({URL}/{name}/v1), so
// every request says which replica sent it. A turn gets a tool call with
// usage; a summary call a tagged summary, or is held when armed.
type replicaUpstream struct {
	*openaitest.Server
	summaries atomic.Int64
	hold      atomic.Pointer[chan string] // armed: the next summary call sends its replica here and never answers
	mu        sync.Mutex
	served    map[string]string // guarded by mu: summary tag -> replica that got it
}

func newReplicaUpstream(t *testing.T, replicas ...string) *replicaUpstream {
	u := &replicaUpstream{Server: openaitest.New(t), served: map[string]string{}}
	for _, name := range replicas {
		u.Handle("/"+name+"/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := strictChat(r, body); err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error())
				return
			}
			if openaitest.IsSummaryRequest(body) {
				u.summary(w, r, body, name)
				return
			}
			answerToolCall(w, body)
		})
	}
	return u
}

// strictChat refuses what a real server refuses: another method or
// content type, a body that is no valid chat request, no model.
func strictChat(r *http.Request, body []byte) error {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return fmt.Errorf("want POST application/json, got %s %q", r.Method, r.Header.Get("Content-Type"))
	}
	if err := chatcheck.ValidateChat(body); err != nil {
		return err
	}
	if gjson.GetBytes(body, "model").String() == "" {
		return fmt.Errorf("model is required")
	}
	return nil
}

func (u *replicaUpstream) summary(w http.ResponseWriter, r *http.Request, body []byte, replica string) {
	if ch := u.hold.Swap(nil); ch != nil {
		*ch <- replica
		<-r.Context().Done() // held until its replica is gone
		return
	}
	// Tagged by what it summarises: two runs of one conversation get the
	// same summary, and the record's summary says which call wrote it.
	u.summaries.Add(1)
	h := sha256.Sum256(body)
	tag := fmt.Sprintf("summary-%x", h[:6])
	u.mu.Lock()
	u.served[tag] = replica
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"s","object":"chat.completion","created":1715367049,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"## Goal\nFix the build.\n\n## Active Task\n%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":20,"total_tokens":%d}}`,
		tag, openaitest.PromptTokens(body), openaitest.PromptTokens(body)+20)
}

// answerToolCall answers a turn with a bash tool call whose id comes from
// the request's last message: the same request gets the same answer.
func answerToolCall(w http.ResponseWriter, body []byte) {
	msgs := gjson.GetBytes(body, "messages").Array()
	h := sha256.Sum256([]byte(msgs[len(msgs)-1].Raw))
	id := fmt.Sprintf("call_%x", h[:6])
	prompt := openaitest.PromptTokens(body)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-%s","object":"chat.completion","created":1715367049,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"%s","type":"function","function":{"name":"bash","arguments":"{\"command\":\"go build ./...\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":%d,"completion_tokens":12,"total_tokens":%d}}`,
		id, id, prompt, prompt+12)
}

// replicaOf is the replica that sent an upstream request (its path's head).
func replicaOf(r openaitest.Request) string {
	return strings.SplitN(strings.TrimPrefix(r.Path, "/"), "/", 2)[0]
}

// byReplica keeps the requests of the given replicas, in arrival order.
func byReplica(reqs []openaitest.Request, replicas ...string) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range reqs {
		for _, name := range replicas {
			if replicaOf(r) == name && strings.HasSuffix(r.Path, "/chat/completions") {
				out = append(out, r)
			}
		}
	}
	return out
}

// toolAgent is a tool-using conversation over raw HTTP: it appends the
// upstream's assistant message as answered and a ~1.2 KB tool result.
type toolAgent struct {
	id   string
	msgs []json.RawMessage
}

func newToolAgent(id string) *toolAgent {
	return &toolAgent{id: id, msgs: []json.RawMessage{
		json.RawMessage(`{"role":"system","content":"You are a coding agent."}`),
		json.RawMessage(`{"role":"user","content":"Fix the failing build of ` + id + `."}`),
	}}
}

// send posts the history once and returns the status and the answer.
func (a *toolAgent) send(url string) (int, []byte, error) {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": a.msgs})
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-agent")
	req.Header.Set("X-Session-ID", a.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, answer, err
}

// turn sends the history and, answered 200, appends the answer's
// assistant message and the result of its tool call.
func (a *toolAgent) turn(url string) (int, error) {
	status, answer, err := a.send(url)
	if err != nil || status != http.StatusOK {
		return status, err
	}
	msg := gjson.GetBytes(answer, "choices.0.message")
	call := msg.Get("tool_calls.0.id").String()
	if call == "" {
		return status, fmt.Errorf("answer without a tool call: %s", answer)
	}
	var out strings.Builder
	n := len(a.msgs)
	for i := 0; out.Len() < 1200; i++ {
		fmt.Fprintf(&out, "%s/build_%d.go:%d: undefined: handler%d\n", a.id, n, i, i*7)
	}
	result, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": call, "content": out.String()})
	a.msgs = append(a.msgs, json.RawMessage(msg.Raw), result)
	return status, nil
}

// replicaConfig writes a config of replicas sharing the Redis at url
// under prefix, compacting on the request path (no precompaction, whose
// background timing would make two runs differ) past threshold tokens.
func replicaConfig(t *testing.T, url, prefix string, threshold int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	cfg := fmt.Sprintf("state:\n  backend: redis\n  url: %s\n  prefix: %q\ncompaction:\n  threshold_tokens: %d\n  keep_recent: 4\n  precompact: false\n",
		url, prefix, threshold)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var waitingGauge = regexp.MustCompile(`(?m)^ctxpress_compaction_waiting (\S+)$`)

// compactionWaiting is a replica's ctxpress_compaction_waiting gauge.
func compactionWaiting(base string) int {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := waitingGauge.FindSubmatch(b)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return int(n)
}
