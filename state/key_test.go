package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestNamespace(t *testing.T) {
	sum := sha256.Sum256([]byte("Bearer sk-test"))
	if got, want := Namespace([]byte("Bearer sk-test")), hex.EncodeToString(sum[:])[:16]; got != want {
		t.Errorf("Namespace = %s, want %s", got, want)
	}
	if got := Namespace(nil); got != AnonymousNamespace {
		t.Errorf("Namespace(nil) = %s, want %s", got, AnonymousNamespace)
	}
	if got := Namespace([]byte{}); got != AnonymousNamespace {
		t.Errorf("Namespace(empty) = %s, want %s", got, AnonymousNamespace)
	}
	if Namespace([]byte("Bearer a")) == Namespace([]byte("Bearer b")) {
		t.Error("two API keys share a namespace")
	}
	if k := NewKey([]byte("Bearer a"), "c1"); k.Namespace != Namespace([]byte("Bearer a")) || k.ID != "c1" {
		t.Errorf("NewKey = %+v", k)
	}
}

func TestKeyEncodeDecode(t *testing.T) {
	for _, k := range []Key{
		{Namespace: "ns", ID: "id"},
		{Namespace: "a", ID: "\x00b\x00"},
		{Namespace: AnonymousNamespace, ID: strings.Repeat("é", MaxIDLen/2)},
	} {
		if err := k.Validate(); err != nil {
			t.Fatalf("Validate(%q): %v", k, err)
		}
		got, ok := decodeKey(k.encode())
		if !ok || got != k {
			t.Errorf("decodeKey(encode(%q)) = %q, %v", k, got, ok)
		}
	}
	for _, bad := range []string{"", "\x00id", "ns\x00", "nsid"} {
		if k, ok := decodeKey([]byte(bad)); ok {
			t.Errorf("decodeKey(%q) = %q, true; want false", bad, k)
		}
	}
}

func TestKeyValidate(t *testing.T) {
	for _, c := range []struct {
		key Key
		ok  bool
	}{
		{Key{Namespace: "ns", ID: "x"}, true},
		{Key{Namespace: "ns", ID: strings.Repeat("x", MaxIDLen)}, true},
		{Key{Namespace: "ns", ID: strings.Repeat("x", MaxIDLen+1)}, false},
		{Key{Namespace: "ns"}, false},
		{Key{ID: "x"}, false},
		{Key{Namespace: "n\x00", ID: "x"}, false},
		{Key{Namespace: strings.Repeat("n", 65), ID: "x"}, false},
	} {
		err := c.key.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidKey)) {
			t.Errorf("Validate(%q) = %v, want ok %v", c.key, err, c.ok)
		}
	}
}

func TestKeyString(t *testing.T) {
	if got := (Key{Namespace: "ns", ID: "chat 1"}).String(); got != "ns/chat 1" {
		t.Errorf("String = %s", got)
	}
	if got := (Key{Namespace: "ns", ID: "a\nb"}).String(); got != `ns/"a\nb"` {
		t.Errorf("String = %s, want the id quoted", got)
	}
}
