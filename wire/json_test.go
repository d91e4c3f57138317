package wire

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" backslash \\ slash /", "nl\n tab\t cr\r bell\a nul\x00 esc\x1b",
		"<html>&amp;", "unicode é 日本 🎉", "line sep \u2028 para \u2029", "bad utf8 \xff\xfe end", "\x7f del"} {
		out := AppendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q -> %s: %v", s, out, err)
		}
		want := string([]rune(s)) // invalid UTF-8 becomes U+FFFD
		if back != want {
			t.Errorf("%q -> %s -> %q", s, out, back)
		}
		if r := gjson.ParseBytes(out); r.Str != want {
			t.Errorf("gjson reads %q", r.Str)
		}
	}
}
