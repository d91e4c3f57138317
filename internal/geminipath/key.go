package geminipath

import (
	"bytes"
	"net/url"
)

// KeyParam is the query parameter a Gemini client may send its API key in
// (?key=…) instead of the x-goog-api-key header.
const KeyParam = "key"

// HeaderAPIKey is the header Gemini's clients send their API key in.
const HeaderAPIKey = "X-Goog-Api-Key"

// QueryKey returns the value of the first key= parameter of a raw query
// string, unescaped, and whether there is one.
func QueryKey(query []byte) (string, bool) {
	for rest := query; len(rest) > 0; {
		var param []byte
		param, rest, _ = bytes.Cut(rest, []byte("&"))
		name, value, _ := bytes.Cut(param, []byte("="))
		if string(name) != KeyParam {
			continue
		}
		v, err := url.QueryUnescape(string(value))
		if err != nil {
			return string(value), true
		}
		return v, true
	}
	return "", false
}

// WithKey appends query to dst with the value of every key= parameter
// replaced by key (escaped); every other parameter is copied as sent, in
// its place.
func WithKey(dst, query []byte, key string) []byte {
	return replaceKey(dst, query, url.QueryEscape(key))
}

// Redacted appends query to dst with the value of every key= parameter
// replaced by "REDACTED": a query as a log line may show it.
func Redacted(dst, query []byte) []byte { return replaceKey(dst, query, "REDACTED") }

func replaceKey(dst, query []byte, value string) []byte {
	for i, param := range bytes.Split(query, []byte("&")) {
		if i > 0 {
			dst = append(dst, '&')
		}
		if name, _, _ := bytes.Cut(param, []byte("=")); string(name) == KeyParam {
			dst = append(append(append(dst, KeyParam...), '='), value...)
			continue
		}
		dst = append(dst, param...)
	}
	return dst
}
