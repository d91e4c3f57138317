package gemini

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/wire/sse"
	"github.com/tidwall/gjson"
)

func TestAssistantReply(t *testing.T) {
	now := time.Unix(1700000000, 0)
	r := AssistantReply("gemini-2.5-pro", "Compacted <ok> & done", false, now)
	if r.ContentType != "application/json" {
		t.Fatal(r.ContentType)
	}
	check := func(what string, b []byte) {
		t.Helper()
		v := gjson.ParseBytes(b)
		if v.Get("candidates.0.content.role").Str != "model" || v.Get("candidates.0.content.parts.0.text").Str != "Compacted <ok> & done" ||
			v.Get("candidates.0.finishReason").Str != "STOP" || !v.Get("usageMetadata.promptTokenCount").Exists() ||
			v.Get("modelVersion").Str != "gemini-2.5-pro" || v.Get("responseId").Str == "" {
			t.Errorf("%s: %s", what, b)
		}
		if u := UsageFromJSON(b); !u.Found {
			t.Errorf("%s: no usage", what)
		}
	}
	check("json", r.Body)
	s := AssistantReply("gemini-2.5-pro", "Compacted <ok> & done", true, now)
	if s.ContentType != "text/event-stream" || !strings.HasPrefix(string(s.Body), "data: ") || !strings.HasSuffix(string(s.Body), "\r\n\r\n") {
		t.Fatalf("%s %q", s.ContentType, s.Body)
	}
	check("sse", sse.EventData(s.Body))
	var w StreamWatch
	w.Observe(s.Body)
	if !w.Completed() || !w.Usage().Found {
		t.Error("the streamed reply is no whole stream")
	}
	a := ArrayReply("gemini-2.5-pro", "Compacted <ok> & done", now)
	check("array", []byte(gjson.GetBytes(a.Body, "0").Raw))
	var aw StreamWatch
	aw.Observe(a.Body)
	if !aw.Completed() {
		t.Error("the array reply is no whole stream")
	}
}

func TestErrorBodyIsGooglesShape(t *testing.T) {
	for status, want := range map[int]string{
		400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE",
		503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED", 418: "FAILED_PRECONDITION", 599: "INTERNAL",
	} {
		var got struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		b := ErrorBody(status, "upstream unreachable")
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Error.Code != status || got.Error.Status != want || got.Error.Message != "ctxpress: upstream unreachable" {
			t.Errorf("%d: %s", status, b)
		}
	}
}
