package gemini

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// checkRules returns what Google's API would refuse in a request: a model
// content's functionCalls not answered, name for name, by the user content
// right after it; a response that answers no call; and, in the current
// turn (after the latest user content with text), a model content whose
// first functionCall has no thoughtSignature. It is the tests' validator
// of every history an edit rewrote.
func checkRules(body []byte) error {
	contents := gjson.GetBytes(body, "contents").Array()
	turn := 0 // where the current turn starts
	for i, c := range contents {
		if c.Get("role").String() != "model" {
			for _, p := range c.Get("parts").Array() {
				if p.Get("text").Exists() {
					turn = i
				}
			}
		}
	}
	for i, c := range contents {
		if c.Get("role").String() != "model" {
			continue
		}
		calls := map[string]int{}
		first := true
		for _, p := range c.Get("parts").Array() {
			fc := p.Get("functionCall")
			if !fc.Exists() {
				continue
			}
			if first && i > turn && !p.Get("thoughtSignature").Exists() {
				return fmt.Errorf("function call `%s` in content %d is missing a thought_signature", fc.Get("name").String(), i+1)
			}
			first = false
			calls[fc.Get("name").String()]++
		}
		if len(calls) == 0 {
			continue
		}
		if i+1 >= len(contents) {
			return nil // the answer is the model's to give
		}
		for _, p := range contents[i+1].Get("parts").Array() {
			if fr := p.Get("functionResponse"); fr.Exists() {
				calls[fr.Get("name").String()]--
			}
		}
		for name, n := range calls {
			if n != 0 {
				return fmt.Errorf("content %d: %d calls of %s unanswered", i+1, n, name)
			}
		}
	}
	return nil
}

// signedLoop is a tool loop of Gemini 3: each step's first call signed,
// thoughts with their signatures, a final text signed.
const signedLoop = `{"contents":[` +
	`{"role":"user","parts":[{"text":"list and read"}]},` +
	`{"role":"model","parts":[{"text":"plan","thought":true},{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"QQ=="},{"functionCall":{"name":"cat","args":{"f":"x"}}}]},` +
	`{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"x"}}},{"functionResponse":{"name":"cat","response":{"output":"body"}}}]},` +
	`{"role":"model","parts":[{"text":"Done.","thoughtSignature":"Qg=="}]},` +
	`{"role":"user","parts":[{"text":"again"}]},` +
	`{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"Qw=="}]},` +
	`{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"x"}}}]}]}`

// leaveOut applies Format.LeaveOut to content m of body.
func leaveOut(t *testing.T, body string, m int) (string, int, bool) {
	t.Helper()
	c := parse(t, body)
	eds, tokens, ok := Format{}.LeaveOut(c, m, count)
	at := c.Messages[m].Start
	for i := range eds {
		eds[i].Start += at
		eds[i].End += at
	}
	return string(outside(t, c.Body, eds)), tokens, ok
}

func TestTheRulesValidatorRefusesWhatGoogleRefuses(t *testing.T) {
	if err := checkRules([]byte(signedLoop)); err != nil {
		t.Fatalf("the loop itself: %v", err)
	}
	unsigned := strings.Replace(signedLoop, `,"thoughtSignature":"Qw=="`, "", 1)
	if err := checkRules([]byte(unsigned)); err == nil || !strings.Contains(err.Error(), "missing a thought_signature") {
		t.Errorf("an unsigned call in the current turn: %v", err)
	}
	earlier := strings.Replace(signedLoop, `,"thoughtSignature":"QQ=="`, "", 1)
	if err := checkRules([]byte(earlier)); err != nil {
		t.Errorf("an unsigned call of an earlier turn is not validated: %v", err)
	}
	unanswered := strings.Replace(signedLoop, `,{"functionResponse":{"name":"cat","response":{"output":"body"}}}`, "", 1)
	if err := checkRules([]byte(unanswered)); err == nil {
		t.Error("a call without its response")
	}
}

func TestLeaveOutDropsThoughtsAndGivesSignedPartsTheDummy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      int
		want   string // the content after LeaveOut
		tokens bool
		ok     bool
	}{
		{"a step: its thought goes, its signed call keeps a signature, the dummy", 1,
			`{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"name":"cat","args":{"f":"x"}}}]}`, true, true},
		{"a signed answer: its text kept, the dummy on it", 3,
			`{"role":"model","parts":[{"text":"Done.","thoughtSignature":"skip_thought_signature_validator"}]}`, false, true},
		{"a content of the user's has nothing bound", 2, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, tokens, ok := leaveOut(t, signedLoop, tc.m)
			if ok != tc.ok {
				t.Fatalf("ok %v", ok)
			}
			if !ok {
				return
			}
			if got := gjson.Get(out, fmt.Sprintf("contents.%d", tc.m)).Raw; got != tc.want {
				t.Errorf("content\n got %s\nwant %s", got, tc.want)
			}
			if tokens > 0 != tc.tokens {
				t.Errorf("tokens %d", tokens)
			}
			if err := checkRules([]byte(out)); err != nil {
				t.Error(err)
			}
			// Every other content is as sent.
			for i, c := range gjson.Get(signedLoop, "contents").Array() {
				if i != tc.m && gjson.Get(out, fmt.Sprintf("contents.%d", i)).Raw != c.Raw {
					t.Errorf("content %d changed", i)
				}
			}
		})
	}
}

func TestLeaveOutKeepsAContentOfThoughtsOnly(t *testing.T) {
	body := `{"contents":[{"role":"model","parts":[{"text":"t","thought":true,"thoughtSignature":"QQ=="}]}]}`
	if _, _, ok := leaveOut(t, body, 0); ok {
		t.Error("left a content without parts")
	}
}

func TestLeaveOutThoughtsAnywhereInTheParts(t *testing.T) {
	body := `{"contents":[{"role":"model","parts":[{"text":"a","thought":true},{"text":"b","thought":true},{"text":"x"},{"text":"c","thought":true},{"functionCall":{"name":"f"},"thoughtSignature":"skip_thought_signature_validator"},{"text":"d","thought":true}]}]}`
	out, _, ok := leaveOut(t, body, 0)
	want := `{"contents":[{"role":"model","parts":[{"text":"x"},{"functionCall":{"name":"f"},"thoughtSignature":"skip_thought_signature_validator"}]}]}`
	if !ok || out != want {
		t.Errorf("got %s", out)
	}
}

func TestLeaveOutIsAFunctionOfTheContent(t *testing.T) {
	// The same content left out on two requests whose other contents
	// differ gives the same bytes: a rewrite is sticky.
	a, _, _ := leaveOut(t, signedLoop, 1)
	longer := strings.TrimSuffix(signedLoop, "]}") + `,{"role":"model","parts":[{"text":"more"}]}]}`
	b, _, _ := leaveOut(t, longer, 1)
	if gjson.Get(a, "contents.1").Raw != gjson.Get(b, "contents.1").Raw {
		t.Error("the content left out differs between requests")
	}
}

func TestDropMismatchedHasNoPlaceInGemini(t *testing.T) {
	if _, ok := (Format{}).DropMismatched(parse(t, signedLoop)); ok {
		t.Error("an edit to drop mismatched parts")
	}
}

func TestNoEditButLeaveOutTouchesASignature(t *testing.T) {
	c := parse(t, every)
	f := Format{}
	req, _ := Parse(c.Body)
	var sigs []wire.Span
	for _, ct := range req.Contents {
		for _, p := range ct.List {
			if p.Signature.Exists() {
				sigs = append(sigs, p.Span) // the whole signed part
			}
		}
	}
	var eds []wire.Edit
	for i, it := range c.Items {
		if it.Content.Exists() {
			eds = append(eds, f.ReplaceContent(c, i, "x"))
		}
	}
	for m := range c.Messages {
		if e, _, ok := f.PrependText(c, m, "p", count); ok {
			at := c.Messages[m].Start
			eds = append(eds, wire.Edit{Start: at + e.Start, End: at + e.End})
		}
	}
	for _, e := range eds {
		if e.Start == e.End && e.Repl == nil {
			continue // an edit that changes nothing
		}
		for _, s := range sigs {
			if e.Start < s.End && s.Start < e.End {
				t.Errorf("an edit [%d,%d) touches the signed part %s", e.Start, e.End, s.Of(c.Body))
			}
		}
	}
}
