package chat

import (
	"testing"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// gjsonUsage is what UsageFromJSON read before it read in place: gjson's
// Get of "usage" and its members, the reference the in-place reader must
// equal on every input.
func gjsonUsage(body []byte) Usage {
	if !jsonvalid.Valid(body) {
		return Usage{}
	}
	u := gjson.GetBytes(body, "usage")
	if !u.IsObject() {
		return Usage{}
	}
	var in, out, cached [2]gjson.Result
	var seen [6]bool
	keep := func(i int, dst *gjson.Result, v gjson.Result) {
		if !seen[i] {
			*dst, seen[i] = v, true
		}
	}
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			keep(0, &in[0], v)
		case "input_tokens":
			keep(1, &in[1], v)
		case "completion_tokens":
			keep(2, &out[0], v)
		case "output_tokens":
			keep(3, &out[1], v)
		case "prompt_tokens_details":
			keep(4, &cached[0], v.Get("cached_tokens"))
		case "input_tokens_details":
			keep(5, &cached[1], v.Get("cached_tokens"))
		}
		return true
	})
	first := func(rs [2]gjson.Result) (gjson.Result, bool) {
		for _, r := range rs {
			if r.Exists() {
				return r, true
			}
		}
		return gjson.Result{}, false
	}
	i, ok := first(in)
	if !ok {
		return Usage{}
	}
	o, _ := first(out)
	c, _ := first(cached)
	return Usage{InputTokens: int(i.Int()), OutputTokens: int(o.Int()), CachedTokens: int(c.Int()), Found: true}
}

// usageAnswers are whole answers whose usage is written every way a
// server might: the reference and the in-place reader must agree on each.
var usageAnswers = []string{
	`{"id":"c","choices":[],"usage":{"prompt_tokens":260,"completion_tokens":2,"total_tokens":262}}`,
	` {"usage" : { "prompt_tokens" : 7 , "prompt_tokens_details" : { "cached_tokens" : 3 } } } `,
	`{"usage":{"prompt_tokens":"12","completion_tokens":12.0,"prompt_tokens_details":{"cached_tokens":1e2}}}`,
	`{"usage":{"prompt_tokens":-4,"completion_tokens":true,"prompt_tokens_details":[1]}}`,
	`{"usage":{"prompt_tokens":12345678901234567890,"completion_tokens":1234567890123456}}`,
	`{"usage":{"prompt\u005ftokens":9,"output_tokens":1}}`,
	`{"us\u0061ge":{"prompt_tokens":9}}`,
	`{"usage":{"input_tokens":90,"input_tokens_details":{"cached_tokens":64}},"usage":{"prompt_tokens":1}}`,
	`{"choices":[{"message":{"usage":{"prompt_tokens":1}}}],"usage":null}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":5},"prompt_tokens_details":{"cached_tokens":6},"prompt_tokens":1}}`,
	`{"usage":{"prompt_tokens_details":{"audio_tokens":0},"prompt_tokens_details":{"cached_tokens":6},"prompt_tokens":1}}`,
	`{"usage":{"prompt_tokens":null}}`,
	`{"usage":[1,2]}`,
	`[{"usage":{"prompt_tokens":1}}]`,
	`{"usage":{"prompt_tokens":1}`,
	`not json`,
	``,
	// Usage last, as servers write it, after content with escapes, braces
	// and the word usage, and names that mean usage only once decoded.
	`{"choices":[{"message":{"content":"a \\\"quoted\\\" {brace} [x] \\\\"}}],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":2},"x":[{"y":"}"}]}}`,
	`{"choices":[{"message":{"content":"the \"usage\" field"}}],"usage" :  {"prompt_tokens":6}  }`,
	`{"choices":[{"message":{"content":"usage"}}],"object":"usage","usage":{"prompt_tokens":7}}`,
	`{"us\u0061ge":null,"usage":{"prompt_tokens":8}}`,
	`{"usage":null,"usage":{"prompt_tokens":9}}`,
	`{"content":"caf\u00e9","usage":{"prompt_tokens":10}}`,
	`{"a":{"usage":{"prompt_tokens":11}}}`,
	`{"a":"\\","usage":{"prompt_tokens":12}}`,
	`{"usage":{}}`,
	`{"x":1,"usage":{"completion_tokens":1}}`,
}

// TestUsageFromJSONReadsWhatGjsonReads: reading the usage in place changes
// no answer's usage.
func TestUsageFromJSONReadsWhatGjsonReads(t *testing.T) {
	for _, a := range usageAnswers {
		if got, want := UsageFromJSON([]byte(a)), gjsonUsage([]byte(a)); got != want {
			t.Errorf("UsageFromJSON(%s) = %+v, want %+v (gjson's)", a, got, want)
		}
	}
}

func FuzzUsageFromJSONReadsWhatGjsonReads(f *testing.F) {
	for _, a := range usageAnswers {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := UsageFromJSON(body), gjsonUsage(body); got != want {
			t.Errorf("UsageFromJSON(%q) = %+v, want %+v (gjson's)", body, got, want)
		}
	})
}
