package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// AnonymousNamespace is the namespace of requests without an Authorization
// header (or with an empty one). It is not hexadecimal, so it can never equal
// the namespace of a real key.
const AnonymousNamespace = "anon"

// MaxIDLen is the longest conversation id, in bytes, a Key may carry.
const MaxIDLen = 256

// maxNamespaceLen bounds Key.Namespace; Namespace returns 16 bytes.
const maxNamespaceLen = 64

// Key addresses one conversation: the namespace of the API key that owns it
// and the conversation id within that namespace.
type Key struct {
	// Namespace separates API keys; see [Namespace]. Non-empty, at most 64
	// bytes, no NUL byte.
	Namespace string
	// ID is the conversation id: a client header, the body's prompt_cache_key
	// or a fingerprint. Any bytes, non-empty, at most MaxIDLen bytes.
	ID string
}

// Namespace returns the namespace for an Authorization header value: the
// first 16 hex digits of its SHA-256, computed over the raw bytes as received
// (scheme included, nothing trimmed). An empty header gives
// AnonymousNamespace. The header itself is never stored.
func Namespace(authorization []byte) string {
	if len(authorization) == 0 {
		return AnonymousNamespace
	}
	sum := sha256.Sum256(authorization)
	var digits [16]byte
	hex.Encode(digits[:], sum[:8])
	return string(digits[:]) // one allocation: EncodeToString makes two
}

// NewKey returns the Key for a conversation id sent with the given
// Authorization header value.
func NewKey(authorization []byte, id string) Key {
	return Key{Namespace: Namespace(authorization), ID: id}
}

// String returns "namespace/id", for logs. The id is quoted when it is not
// printable, so a log line stays one line.
func (k Key) String() string {
	return k.Namespace + "/" + quoteIfNeeded(k.ID)
}

// Validate returns an error wrapping ErrInvalidKey when k cannot be stored.
func (k Key) Validate() error {
	switch {
	case k.Namespace == "":
		return fmt.Errorf("state: %w: empty namespace", ErrInvalidKey)
	case len(k.Namespace) > maxNamespaceLen:
		return fmt.Errorf("state: %w: namespace longer than %d bytes", ErrInvalidKey, maxNamespaceLen)
	case bytes.IndexByte([]byte(k.Namespace), 0) >= 0:
		return fmt.Errorf("state: %w: NUL byte in namespace", ErrInvalidKey)
	case k.ID == "":
		return fmt.Errorf("state: %w: empty id", ErrInvalidKey)
	case len(k.ID) > MaxIDLen:
		return fmt.Errorf("state: %w: id of %d bytes, longer than %d", ErrInvalidKey, len(k.ID), MaxIDLen)
	}
	return nil
}

// encode returns the storage key: namespace, a NUL byte, id. The namespace
// holds no NUL byte, so the first NUL separates the two and a namespace is a
// byte prefix scan (namespacePrefix). Call Validate first.
func (k Key) encode() []byte {
	b := make([]byte, 0, len(k.Namespace)+1+len(k.ID))
	b = append(b, k.Namespace...)
	b = append(b, 0)
	return append(b, k.ID...)
}

// namespacePrefix returns the prefix shared by the storage keys of ns.
func namespacePrefix(ns string) []byte {
	return append([]byte(ns), 0)
}

// decodeKey is the inverse of Key.encode; ok is false for a malformed key.
func decodeKey(b []byte) (k Key, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i <= 0 || i == len(b)-1 {
		return Key{}, false
	}
	return Key{Namespace: string(b[:i]), ID: string(b[i+1:])}, true
}

func quoteIfNeeded(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}
