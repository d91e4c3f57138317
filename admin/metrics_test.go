package admin

import (
	"fmt"
	"testing"
	"time"
)

// MetricPath names known endpoints, with or without /v1, Gemini's turns
// whatever their model, and "other".
func TestMetricPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/chat/completions": "/v1/chat/completions",
		"/chat/completions":    "/v1/chat/completions",
		"/v1/models":           "/v1/models",
		"/models/gpt-4o":       "/v1/models",
		"/v1/chat/other":       "other",
		"/v1/whatever/x":       "other",
		"/":                    "other",
		"/v1beta/models/gemini-3-flash-preview:generateContent":       "/v1beta/models:generateContent",
		"/v1beta/models/gemini-3-flash-preview:streamGenerateContent": "/v1beta/models:streamGenerateContent",
		"/v1/models/gemini-2.5-pro:generateContent":                   "/v1beta/models:generateContent",
		"/v1beta/models/gemini-3-flash-preview:countTokens":           "other",
	} {
		if got := MetricPath(in); got != want {
			t.Errorf("MetricPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// Each request is counted in the series of its path and status, those
// beyond the statuses kept at hand (any three digits an upstream sends)
// too, and only the series that counted something exist.
func TestRequestsAreCountedByPathAndStatus(t *testing.T) {
	m := NewMetrics(func() int { return 0 }, nil, nil)
	for _, x := range []Exchange{
		{Path: "/v1/embeddings", Status: 200, Upstream: time.Millisecond},
		{Path: "/embeddings", Status: 200, Upstream: time.Millisecond},
		{Path: "/v1/embeddings", Status: 404},
		{Path: "/v1/chat/completions", Status: 200},
		{Path: "/v1/whatever", Status: 200},
		{Path: "/v1/embeddings", Status: 799},
		{Path: "/v1/embeddings", Status: 799},
	} {
		m.Exchange(x)
	}
	counts := map[string]float64{} // "path status": count
	latencies := 0
	families, err := m.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "ctxpress_requests_total":
				counts[labels["path"]+" "+labels["status"]] = mt.GetCounter().GetValue()
			case "ctxpress_upstream_latency_seconds":
				latencies++
			}
		}
	}
	want := map[string]float64{"/v1/embeddings 200": 2, "/v1/embeddings 404": 1, "/v1/chat/completions 200": 1,
		"other 200": 1, "/v1/embeddings 799": 2}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("ctxpress_requests_total by path and status:\n%v\nwant\n%v", counts, want)
	}
	if latencies != 1 {
		t.Errorf("%d latency series, want the 1 that observed", latencies)
	}
}

// BenchmarkMetricsExchange is the metrics' cost of one pass-through
// request: its count and its upstream latency.
func BenchmarkMetricsExchange(b *testing.B) {
	m := NewMetrics(func() int { return 0 }, nil, nil)
	x := Exchange{Path: "/v1/embeddings", Status: 200, Upstream: 300 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		m.Exchange(x)
	}
}
