package gemini

import (
	"strings"
	"testing"
)

// chunk1 and chunk2 are the two GenerateContentResponses of one streamed
// answer as Google sends them: usageMetadata on each, the totals and the
// finishReason on the last.
const (
	chunk1 = `{"candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}],` +
		`"usageMetadata": {"promptTokenCount": 1200,"candidatesTokenCount": 1,"totalTokenCount": 1201},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`
	chunk2 = `{"candidates": [{"content": {"parts": [{"text": "lo \"}\" ]"}],"role": "model"},"finishReason": "STOP","index": 0}],` +
		`"usageMetadata": {"promptTokenCount": 1200,"candidatesTokenCount": 5,"totalTokenCount": 1335,"cachedContentTokenCount": 1024,"thoughtsTokenCount": 100,"toolUsePromptTokenCount": 30},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`
)

// wantUsage is the usage of chunk2: the prompt with the tools' results,
// the output with the thoughts.
var wantUsage = Usage{InputTokens: 1230, OutputTokens: 105, CachedTokens: 1024, Found: true}

// sseStream is the answer with ?alt=sse; arrayStream without, a JSON
// array pretty-printed element by element as Google streams it.
var (
	sseStream   = "data: " + chunk1 + "\r\n\r\ndata: " + chunk2 + "\r\n\r\n"
	arrayStream = "[" + chunk1 + "\n,\r\n" + chunk2 + "\n]"
)

func TestReadUsage(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Usage
	}{
		{chunk2, wantUsage},
		{chunk1, Usage{InputTokens: 1200, OutputTokens: 1, Found: true}},
		{`{"usage_metadata":{"prompt_token_count":7,"candidates_token_count":2,"cached_content_token_count":4}}`, Usage{InputTokens: 7, OutputTokens: 2, CachedTokens: 4, Found: true}},
		{`{"candidates":[]}`, Usage{}},
		{`{"usageMetadata":{}}`, Usage{}},
		{`{"usageMetadata":null}`, Usage{}},
		{arrayStream, wantUsage},
		{`not json`, Usage{}},
	} {
		if got := UsageFromJSON([]byte(tc.body)); got != tc.want {
			t.Errorf("%.60s: %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

func TestStreamWatchReadsBothShapesWhereverReadsSplit(t *testing.T) {
	for name, stream := range map[string]string{"sse": sseStream, "sse-lf": strings.ReplaceAll(sseStream, "\r\n", "\n"), "array": arrayStream} {
		for cut := 0; cut <= len(stream); cut++ {
			var w StreamWatch
			w.Observe([]byte(stream[:cut]))
			w.Observe([]byte(stream[cut:]))
			if w.Usage() != wantUsage || !w.Completed() || w.FinishReason() != "STOP" || w.Errored() {
				t.Fatalf("%s cut at %d: usage %+v completed %v", name, cut, w.Usage(), w.Completed())
			}
		}
		var bytewise StreamWatch
		for i := range len(stream) {
			bytewise.Observe([]byte{stream[i]})
		}
		if bytewise.Usage() != wantUsage || !bytewise.Completed() {
			t.Fatalf("%s byte by byte: %+v", name, bytewise.Usage())
		}
	}
}

func TestStreamWatchSeesAStreamCutShortOrFailed(t *testing.T) {
	for name, stream := range map[string]string{
		"sse cut":   "data: " + chunk1 + "\r\n\r\n",
		"array cut": "[" + chunk1 + "\n,\r\n" + chunk2[:40],
	} {
		var w StreamWatch
		w.Observe([]byte(stream))
		if w.Ended() || w.Completed() {
			t.Errorf("%s: ended", name)
		}
		if w.Usage().InputTokens != 1200 {
			t.Errorf("%s: usage so far %+v", name, w.Usage())
		}
	}
	for name, stream := range map[string]string{
		"sse":   "data: " + chunk1 + "\r\n\r\n" + `data: {"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}` + "\r\n\r\n",
		"array": "[" + chunk1 + ",\n" + `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}` + "]",
	} {
		var w StreamWatch
		w.Observe([]byte(stream))
		if !w.Ended() || w.Completed() || !w.Errored() {
			t.Errorf("%s error: ended %v completed %v", name, w.Ended(), w.Completed())
		}
	}
	var blocked StreamWatch
	blocked.Observe([]byte(`data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}` + "\n\n"))
	if !blocked.Completed() || blocked.Usage().InputTokens != 9 {
		t.Error("a blocked prompt is a whole answer")
	}
}

func TestStreamWatchSkipsAnOverlongElement(t *testing.T) {
	huge := `{"candidates":[{"content":{"parts":[{"text":"` + strings.Repeat("x", 5<<20) + `"}]}}]}`
	var w StreamWatch
	w.Observe([]byte("[" + huge + ",\n" + chunk2 + "]"))
	if w.Usage() != wantUsage || !w.Completed() {
		t.Errorf("after an overlong element: %+v", w.Usage())
	}
}

func TestStreamAsks(t *testing.T) {
	for _, tc := range []struct {
		path   string
		stream bool
	}{
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", true},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", true},
		{"/v1/models/gemini-2.5-pro:generateContent", false},
		{"/v1beta/models/gemini-2.5-pro:generateContent?key=streamGenerateContent", false},
		{"/v1beta/models/gemini-2.5-pro:countTokens", false},
	} {
		if s, u := StreamAsks([]byte(tc.path)); s != tc.stream || u != tc.stream {
			t.Errorf("%s: %v %v", tc.path, s, u)
		}
	}
	for q, want := range map[string]bool{"alt=sse": true, "?key=k&alt=sse": true, "?alt=json": false, "": false, "?alt=sseX": false} {
		if SSEAsked([]byte(q)) != want {
			t.Errorf("SSEAsked(%q) != %v", q, want)
		}
	}
}
