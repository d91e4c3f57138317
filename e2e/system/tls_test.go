package system

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/tidwall/gjson"
)

// Hosted providers answer over HTTPS. The real binary in front of an HTTPS
// upstream: chat (plain and streamed) and pass-through work when the
// upstream's certificate is trusted (here through SSL_CERT_FILE, as a user
// with a private CA would), and an untrusted one is a clean 502 that says
// why, never a request sent in the clear.
func TestHTTPSUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	up := openaitest.NewTLS(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, up.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := ctxpressBinary(t)
	_, url, logs := startBinaryEnv(t, bin, []string{"SSL_CERT_FILE=" + ca}, "--upstream", up.BaseURL(),
		"--db", filepath.Join(t.TempDir(), "a.db"))
	go func() {
		for logs.Scan() {
		}
	}()

	post := func(url, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := range 3 { // a kept-alive connection is reused
		status, body := post(url, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if status != 200 || gjson.Get(body, "choices.0.message.content").String() != up.Reply {
			t.Fatalf("chat %d over HTTPS: %d %s", i, status, body)
		}
	}
	status, body := post(url, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || !strings.Contains(body, "data: [DONE]") || !strings.Contains(body, `"content":"Hello`) {
		t.Fatalf("streamed chat over HTTPS: %d %s", status, body)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pass-through over HTTPS: %d", resp.StatusCode)
	}
	chats, _ := up.ChatRequests()
	if len(chats) != 4 {
		t.Fatalf("the upstream got %d chat requests, want 4", len(chats))
	}

	// A compaction's summary call goes over HTTPS too (its own client).
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the leap-year bug."}}
	for i := range 4 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"grep -n leap part%d.go"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat(fmt.Sprintf("part%d.go: if year%%4 == 0 { days = 29 }\n", i), 30)})
	}
	chatBody, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(chatBody))
	req.Header.Set("X-Session-ID", "tls")
	req.Header.Set("X-Ctxpress-Compact", "force")
	cresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cbody, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	if cresp.StatusCode != 200 || cresp.Header.Get("X-Ctxpress-Compacted") != "true" {
		t.Fatalf("forced compaction over HTTPS: %d, compacted %q: %s", cresp.StatusCode, cresp.Header.Get("X-Ctxpress-Compacted"), cbody)
	}
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("%d summary calls reached the HTTPS upstream", len(summaries))
	}

	// Without the CA the upstream is not trusted.
	_, untrusting, logs2 := startBinaryEnv(t, bin, []string{"SSL_CERT_FILE=" + filepath.Join(t.TempDir(), "none.pem")}, "--upstream", up.BaseURL(),
		"--db", filepath.Join(t.TempDir(), "b.db"))
	go func() {
		for logs2.Scan() {
		}
	}()
	status, body = post(untrusting, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Fatalf("untrusted upstream: %d %s", status, body)
	}
	if chats, _ := up.ChatRequests(); len(chats) != 5 {
		t.Fatal("a request reached an upstream whose certificate was not trusted")
	}
}
