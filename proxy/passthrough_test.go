package proxy

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// A 10 MiB body on a path ctxpress does not intercept arrives upstream byte
// for byte, and the answer comes back byte for byte.
func TestPassthroughIsByteExact(t *testing.T) {
	up := openaitest.New(t)
	up.Handle("/v1/files/blob", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		w.Header().Set("X-Body-Sha256", hex.EncodeToString(sum[:]))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})

	body := make([]byte, 10<<20)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(body)
	req, _ := http.NewRequest(http.MethodPut, p.URL+"/v1/files/blob?purpose=test&x=%2F", bytes.NewReader(body))
	req.Header.Set("X-Custom", "kept")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)

	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if h := resp.Header.Get("X-Body-Sha256"); h != hex.EncodeToString(want[:]) {
		t.Fatalf("upstream saw sha256 %s, want %x", h, want)
	}
	if sha256.Sum256(got) != want {
		t.Fatalf("answer differs from what the upstream sent (%d bytes)", len(got))
	}
	last := up.Last(t)
	if last.Method != http.MethodPut || last.Path != "/v1/files/blob" || last.Query != "purpose=test&x=%2F" {
		t.Fatalf("upstream got %s %s?%s", last.Method, last.Path, last.Query)
	}
	if last.Header.Get("X-Custom") != "kept" || last.Header.Get("X-Hop") != "" {
		t.Fatalf("headers upstream: X-Custom=%q X-Hop=%q", last.Header.Get("X-Custom"), last.Header.Get("X-Hop"))
	}
}

// A compressed answer is relayed compressed, and the chat handler still reads
// its usage from a decoded side copy.
func TestCompressedAnswerPassesThrough(t *testing.T) {
	up := openaitest.New(t)
	plain := []byte(`{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":5,"total_tokens":1239}}`)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(plain)
	_ = zw.Close()
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zipped.Bytes())
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})

	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(got, zipped.Bytes()) {
		t.Fatalf("compressed answer changed: encoding %q, %d bytes", resp.Header.Get("Content-Encoding"), len(got))
	}
	if up.Last(t).Header.Get("Accept-Encoding") != "gzip" {
		t.Fatal("Accept-Encoding did not reach the upstream")
	}
	if !strings.Contains(p.logs.String(), `"input_tokens":1234`) {
		t.Fatalf("usage not read from the gzip answer; log:\n%s", p.logs.String())
	}
}

// A client configured without /v1 reaches the same upstream paths.
func TestBarePathMapsToUpstream(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	resp, err := http.Get(p.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || up.Last(t).Path != "/v1/models" {
		t.Fatalf("status %d, upstream path %q", resp.StatusCode, up.Last(t).Path)
	}
}

// upstream_api_key replaces the client's Authorization upstream.
func TestUpstreamAPIKeyReplacesAuthorization(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), UpstreamAPIKey: "sk-provider"})
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer client-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := up.Last(t).Header.Get("Authorization"); got != "Bearer sk-provider" {
		t.Fatalf("upstream Authorization = %q", got)
	}
	if strings.Contains(p.logs.String(), "sk-provider") || strings.Contains(p.logs.String(), "client-key") {
		t.Fatal("a key reached the log")
	}
}

// Hop-by-hop headers describe the client's connection to ctxpress, not
// ctxpress's to the upstream: those RFC 9110 names and every header the
// Connection header names stay behind; the others go on.
func TestHeadersNamedInConnectionDoNotReachTheUpstream(t *testing.T) {
	up := newRawUpstream(t)
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	sent := []string{"Connection: keep-alive, X-Hop-Secret ,x-other-hop", "X-Hop-Secret: 1", "X-Other-Hop: 2",
		"Keep-Alive: timeout=5", "Proxy-Authorization: Basic c2VjcmV0", "Te: trailers", "X-End: kept"}
	if status := rawPost(t, strings.TrimPrefix(p.URL, "http://"), "/v1/embeddings", sent, `{"model":"m","input":"x"}`); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	got := strings.ToLower(strings.Join(up.last(t), "\n"))
	for _, gone := range []string{"x-hop-secret", "x-other-hop", "keep-alive: timeout", "proxy-authorization", "te: trailers"} {
		if strings.Contains(got, gone) {
			t.Errorf("%s reached the upstream:\n%s", gone, got)
		}
	}
	if !strings.Contains(got, "x-end: kept") {
		t.Errorf("X-End did not reach the upstream:\n%s", got)
	}
}
