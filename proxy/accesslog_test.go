package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// The access line of a pass-through request says what it got, under the
// names docs/observability.md gives: method, path, status, dur and upstream (in
// milliseconds, as numbers), bytes_in, bytes_out; nothing else at info.
func TestPassThroughAccessLineHasEveryFieldUnderItsName(t *testing.T) {
	answer := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}]}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	p := startProxy(t, Config{Upstream: up.URL + "/v1"})
	body := `{"model":"text-embedding-3-small","input":"hello"}`
	resp, err := http.Post(p.URL+"/v1/embeddings", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var line map[string]any
	waitFor(t, func() bool {
		for _, l := range strings.Split(p.logs.String(), "\n") {
			if strings.Contains(l, `"message":"request"`) {
				return json.Unmarshal([]byte(l), &line) == nil
			}
		}
		return false
	}, "the access line")
	var keys []string
	for k := range line {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"bytes_in", "bytes_out", "dur_ms", "level", "message", "method", "path", "status", "upstream_ms"}; !slices.Equal(keys, want) {
		t.Fatalf("fields %v, want %v: %v", keys, want, line)
	}
	dur, _ := line["dur_ms"].(float64)
	upstream, _ := line["upstream_ms"].(float64)
	if upstream <= 0 || dur < upstream {
		t.Errorf("dur %v and upstream %v: want numbers, 0 < upstream <= dur", line["dur_ms"], line["upstream_ms"])
	}
	for k, want := range map[string]any{"level": "info", "method": "POST", "path": "/v1/embeddings", "status": 200.0,
		"bytes_in": float64(len(body)), "bytes_out": float64(len(answer))} {
		if line[k] != want {
			t.Errorf("%s = %v, want %v", k, line[k], want)
		}
	}
}
