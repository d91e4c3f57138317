package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendWithHTMLEscapingIsEncodingJSONs: with escapeHTML the bytes are
// json.Marshal's, for every escaping class.
func TestAppendWithHTMLEscapingIsEncodingJSONs(t *testing.T) {
	for _, s := range cases() {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append(nil, s, true); string(got) != string(want) {
			t.Errorf("Append(%q, true) = %s, want %s", s, got, want)
		}
	}
}

// TestAppendWithoutHTMLEscapingLeavesHTMLAlone: without, the bytes are
// json.Encoder's with SetEscapeHTML(false), and the result decodes back.
func TestAppendWithoutHTMLEscapingLeavesHTMLAlone(t *testing.T) {
	for _, s := range cases() {
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(sb.String(), "\n")
		if got := Append(nil, s, false); string(got) != want {
			t.Errorf("Append(%q, false) = %s, want %s", s, got, want)
		}
	}
	if got := string(Append([]byte("x="), "<a&b>", false)); got != `x="<a&b>"` {
		t.Errorf("got %s", got)
	}
}

func cases() []string {
	return []string{"", "plain", `quote " backslash \`, "\b\f\n\r\t", "\x00\x01\x1f", "\x7f DEL",
		"<script>&amp;</script>", "bad \xff\xfe utf-8", "trailing \xe2\x82", "line\u2028para\u2029",
		"héllo wörld ✓ 🎉", strings.Repeat("long run of safe text ", 50) + "\n"}
}
