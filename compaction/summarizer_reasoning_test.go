package compaction

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// strictOpenAI is an upstream as strict as api.openai.com that treats the
// reasoning families and the names in extra as reasoning models, and counts
// the calls per model.
type strictOpenAI struct {
	*openaitest.Server
	mu    sync.Mutex // guards calls
	calls map[string]int
}

func newStrictOpenAI(t *testing.T, extra ...string) *strictOpenAI {
	s := &strictOpenAI{Server: openaitest.New(t), calls: map[string]int{}}
	strict := openaitest.StrictOpenAI(func(model string) bool {
		for _, e := range extra {
			if model == e {
				return true
			}
		}
		name := model[strings.LastIndexByte(model, '/')+1:]
		return strings.HasPrefix(name, "gpt-5") || strings.HasPrefix(name, "o1") || strings.HasPrefix(name, "o3") || strings.HasPrefix(name, "o4")
	}, "## Goal\nShip it.")
	s.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.calls[gjson.GetBytes(body, "model").String()]++
		s.mu.Unlock()
		strict(w, r)
	})
	return s
}

func (s *strictOpenAI) callsFor(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[model]
}

func summarizeWith(t *testing.T, sum *Summarizer, baseURL, model string, reasoning *bool) error {
	t.Helper()
	res, err := sum.Summarize(context.Background(), SummaryRequest{
		BaseURL: baseURL, Model: model, Prompt: "summarise this", MaxTokens: 2000, Timeout: 10 * time.Second, Reasoning: reasoning,
	})
	if err == nil && res.Text != "## Goal\nShip it." {
		t.Errorf("%s: summary %q", model, res.Text)
	}
	return err
}

// OpenAI's reasoning models refuse max_tokens and temperature 0.3 with a
// 400: the summary call for one goes right the first time.
func TestReasoningModelCompactionSucceeds(t *testing.T) {
	up := newStrictOpenAI(t)
	sum := NewSummarizer()
	for _, model := range []string{"gpt-5-mini", "openai/gpt-5-mini", "o3-mini", "o4-mini", "gpt-4o"} {
		if err := summarizeWith(t, sum, up.BaseURL(), model, nil); err != nil {
			t.Errorf("%s: %v", model, err)
		}
		if n := up.callsFor(model); n != 1 {
			t.Errorf("%s: %d calls, want 1", model, n)
		}
	}
	body := up.Requests()[0].Body // gpt-5-mini's
	if gjson.GetBytes(body, "max_tokens").Exists() || gjson.GetBytes(body, "temperature").Exists() ||
		gjson.GetBytes(body, "max_completion_tokens").Int() < 2000 {
		t.Errorf("reasoning model's summary call: %s", body)
	}
	last := up.Last(t).Body // gpt-4o's: the classic call, as before
	if gjson.GetBytes(last, "max_tokens").Int() != 2000 || gjson.GetBytes(last, "temperature").Float() != 0.3 ||
		gjson.GetBytes(last, "max_completion_tokens").Exists() {
		t.Errorf("classic model's summary call: %s", last)
	}
}

// A model the table does not know (an Azure deployment name, a gateway
// alias) that the upstream treats as reasoning: the first call is refused,
// the retry succeeds, and the Summarizer remembers it for that upstream and
// model, so the next summary goes right the first time.
func TestUnknownReasoningModelIsLearnedFromTheRefusal(t *testing.T) {
	up := newStrictOpenAI(t, "corp-reasoner")
	sum := NewSummarizer()
	if err := summarizeWith(t, sum, up.BaseURL(), "corp-reasoner", nil); err != nil {
		t.Fatal(err)
	}
	if n := up.callsFor("corp-reasoner"); n != 2 {
		t.Fatalf("first summary: %d calls, want 2 (refused, then right)", n)
	}
	if err := summarizeWith(t, sum, up.BaseURL(), "corp-reasoner", nil); err != nil {
		t.Fatal(err)
	}
	if n := up.callsFor("corp-reasoner"); n != 3 {
		t.Fatalf("second summary: %d calls in all, want 3: the refusal was not remembered", n)
	}
	// What was learned belongs to that upstream: another one is asked afresh.
	other := newStrictOpenAI(t, "corp-reasoner")
	if err := summarizeWith(t, sum, other.BaseURL(), "corp-reasoner", nil); err != nil {
		t.Fatal(err)
	}
	if n := other.callsFor("corp-reasoner"); n != 2 {
		t.Errorf("another upstream: %d calls, want 2", n)
	}
	// The config's word (models: {corp-reasoner: {reasoning: true}}) makes
	// the first call right.
	yes := true
	third := newStrictOpenAI(t, "corp-reasoner")
	if err := summarizeWith(t, NewSummarizer(), third.BaseURL(), "corp-reasoner", &yes); err != nil {
		t.Fatal(err)
	}
	if n := third.callsFor("corp-reasoner"); n != 1 {
		t.Errorf("configured as reasoning: %d calls, want 1", n)
	}
}

// A refusal that names no parameter ctxpress can change is not retried.
func TestSummaryRefusalOfAnotherParameterIsNotRetried(t *testing.T) {
	up := openaitest.New(t)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"Unsupported parameter: 'stream' is not supported with this model.","type":"invalid_request_error","param":"stream","code":"unsupported_parameter"}}`))
	})
	err := summarizeWith(t, NewSummarizer(), up.BaseURL(), "gpt-5-mini", nil)
	if err == nil || !strings.Contains(err.Error(), "'stream' is not supported") {
		t.Fatalf("error %v", err)
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
}
