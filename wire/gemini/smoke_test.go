package gemini

import "testing"

func TestParseSmoke(t *testing.T) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"c2ln"}]},{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"a b"}}}]}],"systemInstruction":{"parts":[{"text":"sys"}]}}`)
	c, ok := Format{Model: "gemini-3-pro"}.Parse(body)
	if !ok || len(c.Messages) != 3 || !c.Bound || c.Items[1].CallID != "ls#1" || c.Items[2].CallID != "ls#1" {
		t.Fatalf("%v %+v", ok, c)
	}
	if got := (Format{}).Text(c, 2); got != "a b" {
		t.Fatal(got)
	}
}
