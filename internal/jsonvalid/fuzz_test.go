package jsonvalid

import (
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzValid checks Valid against the oracle, gjson.ValidBytes.
//
//	go test -run '^$' -fuzz FuzzValid -fuzztime 60s ./internal/jsonvalid/
func FuzzValid(f *testing.F) {
	for _, tc := range tableCases {
		f.Add([]byte(tc.in))
	}
	for seed := range uint64(4) {
		body := smallChatBody(seed)
		f.Add(body)
		f.Add(prettyBody(body))
		f.Add(asciiBody(body))
	}
	f.Add(chatBody(5, 1)) // one full turn, ~10 KB
	f.Add([]byte(`{"a":"` + "0123456\\\"89abcde\\\\0123456\\u00e9abcdef\\n" + `"}`))
	f.Add([]byte(`[[[[{"a":[{"b":[]}]}]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := gjson.ValidBytes(data)
		if got := Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, gjson.ValidBytes = %v", data, got, want)
		}
	})
}

// resumePrefix is the start of a request up to the end of its second
// message: ValidAfterElement's state at its end.
const resumePrefix = `{"model":"m","messages":[{"role":"user","content":"a\"b"} , {"role":"tool","content":[1,{"x":null}]}`

// FuzzValidAfterElement checks that reading a body from the end of a
// message on (ValidAfterElement) answers what reading it whole does, for
// any bytes after that message.
func FuzzValidAfterElement(f *testing.F) {
	for _, s := range []string{"]}", "] }  ", `,{"role":"assistant"}],"stream":true}`, "]", "}", "]}x", "],}", ",]}", `]}]`,
		`,"k":1]}`, ` ,[[]] ] , "tools" : [ ] } `, "", " "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, rest []byte) {
		data := append([]byte(resumePrefix), rest...)
		want := gjson.ValidBytes(data)
		if got := ValidAfterElement(data, len(resumePrefix)); got != want {
			t.Fatalf("ValidAfterElement(%q, %d) = %v, gjson.ValidBytes = %v", data, len(resumePrefix), got, want)
		}
	})
}
