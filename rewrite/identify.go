package rewrite

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/wire"
)

// Identify modes.
const (
	ModeAuto   = "auto"   // headers, then prompt_cache_key, then a fingerprint
	ModeHeader = "header" // headers and prompt_cache_key only; no fingerprint
)

// MaxIDBytes is the longest conversation id accepted from a client.
const MaxIDBytes = 256

// DefaultConversationHeaders are the headers real agents send a
// conversation id in, in the order they are looked at (codex: session-id
// and thread-id; Claude Code: X-Claude-Code-Session-Id).
func DefaultConversationHeaders() []string {
	return []string{"X-Conversation-ID", "X-Session-ID", "session_id", "session-id", "thread-id", "X-Claude-Code-Session-Id"}
}

// IdentifyConfig says where a conversation id comes from.
type IdentifyConfig struct {
	// Headers are looked at in order; the first present one wins.
	// nil means DefaultConversationHeaders; an empty, non-nil slice means none.
	Headers []string
	// Mode is ModeAuto (also for "") or ModeHeader.
	Mode string
}

// Validate reports a config Identify cannot follow.
func (c IdentifyConfig) Validate() error {
	switch c.Mode {
	case "", ModeAuto, ModeHeader:
	default:
		return fmt.Errorf("rewrite: identify mode %q: %w", c.Mode, ErrBadConfig)
	}
	for _, h := range c.Headers {
		if h == "" || strings.ContainsAny(h, " :\r\n") {
			return fmt.Errorf("rewrite: conversation header %q: %w", h, ErrBadConfig)
		}
	}
	return nil
}

// Identity is a conversation id and where it came from.
type Identity struct {
	ID string
	// Source is "header:<name as configured>", "body:prompt_cache_key",
	// "body:metadata.user_id" (Claude Code's session id), "fingerprint",
	// or "" when there is no id.
	Source string
	// Rejected lists the sources whose value was present but refused (longer
	// than MaxIDBytes, or holding non-printable characters), so the caller
	// can warn. A rejected value is treated as absent.
	Rejected []string
}

// Identify finds the conversation id of a request: the first present of the
// configured headers, else the body's `prompt_cache_key`, else the session
// id the body carries (wire.Conversation.SessionID: Claude Code's
// metadata.user_id), else (ModeAuto) a
// fingerprint: "fp-" and the first 16 hex digits of a sha256 over the
// leading system/developer messages and the first user message, each as its
// role and content text (text parts joined by newlines), so extra fields such
// as cache_control markers that clients move from turn to turn do not change
// it. The fingerprint stays the same as the conversation grows.
//
// header returns a request header's value, nil when absent; it should look
// names up case-insensitively (fasthttp's RequestHeader.Peek and net/http's
// Header.Get do). Identify also asks for the lower-case and canonical
// spellings of each name, so a lookup that is not case-insensitive still
// finds the common spellings. body may be anything; a body that is not JSON
// gives only header ids.
func Identify(cfg IdentifyConfig, f wire.Format, header func(name string) []byte, body []byte) Identity {
	return identify(cfg, headerNamesOf(cfg), header, func() *Parsed { return Parse(f, body) }, fingerprint)
}

// headerName is a configured conversation header as identify asks for it:
// the Source it reports and the spellings it looks up, in order (the name
// as configured, then lower-cased and in canonical MIME form, each when it
// differs from those before). A Pipeline makes them once, not per request.
type headerName struct {
	src       string
	spellings []string
}

// headerNamesOf returns cfg's conversation headers (DefaultConversationHeaders
// when nil) as identify asks for them.
func headerNamesOf(cfg IdentifyConfig) []headerName {
	names := cfg.Headers
	if names == nil {
		names = DefaultConversationHeaders()
	}
	out := make([]headerName, len(names))
	for i, name := range names {
		sp := []string{name}
		for _, s := range [2]string{strings.ToLower(name), canonicalHeaderKey(name)} {
			if !slices.Contains(sp, s) {
				sp = append(sp, s)
			}
		}
		out[i] = headerName{src: "header:" + name, spellings: sp}
	}
	return out
}

// foldedNames are names with their first spelling only, for a lookup
// that ignores case.
func foldedNames(names []headerName) []headerName {
	out := make([]headerName, len(names))
	for i, n := range names {
		out[i] = headerName{src: n.src, spellings: n.spellings[:1]}
	}
	return out
}

// identify parses the body only when no header names the conversation;
// fingerprintOf is fingerprint or a Pipeline's memo of it.
func identify(cfg IdentifyConfig, names []headerName, header func(name string) []byte, parsed func() *Parsed,
	fingerprintOf func(*wire.Conversation, wire.Format) string) Identity {
	var id Identity
	if header != nil {
		for _, name := range names {
			v := lookupHeader(header, name.spellings)
			if v == nil {
				continue
			}
			if !validID(v) {
				id.Rejected = append(id.Rejected, name.src)
				continue
			}
			id.ID, id.Source = string(v), name.src
			return id
		}
	}
	p := parsed()
	if !p.valid {
		return id
	}
	if p.conv != nil && p.conv.CacheKey.Exists() {
		if k, ok := wire.StringValue(p.body, p.conv.CacheKey); ok && k != "" {
			const src = "body:prompt_cache_key"
			if validID([]byte(k)) {
				id.ID, id.Source = k, src
				return id
			}
			id.Rejected = append(id.Rejected, src)
		}
	}
	if p.conv != nil && p.conv.SessionID != "" {
		const src = "body:metadata.user_id"
		if validID([]byte(p.conv.SessionID)) {
			id.ID, id.Source = p.conv.SessionID, src
			return id
		}
		id.Rejected = append(id.Rejected, src)
	}
	if cfg.Mode == ModeHeader || !p.chat {
		return id
	}
	if fp := fingerprintOf(p.conv, p.format); fp != "" {
		id.ID, id.Source = fp, "fingerprint"
	}
	return id
}

// lookupHeader asks header for each spelling of a name in turn (as
// configured, lower-cased, canonical) and returns the first value. An empty
// value counts as absent.
func lookupHeader(header func(string) []byte, spellings []string) []byte {
	for _, s := range spellings {
		if v := header(s); len(v) > 0 {
			return v
		}
	}
	return nil
}

// canonicalHeaderKey is textproto.CanonicalMIMEHeaderKey (which would put
// package net under the core): the first letter and every letter after a
// hyphen upper case, the rest lower case; a name with a byte that is not
// a header token character is returned unchanged.
func canonicalHeaderKey(name string) string {
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return name
		}
	}
	b := []byte(name)
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}

// isTokenByte reports whether c may appear in a header name (RFC 7230's
// tchar).
func isTokenByte(c byte) bool {
	return c < 0x80 && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0)
}

// validID reports whether v is usable as a conversation id: at most
// MaxIDBytes of valid UTF-8, every character printable (spaces allowed).
func validID(v []byte) bool {
	if len(v) == 0 || len(v) > MaxIDBytes || !utf8.Valid(v) {
		return false
	}
	for _, r := range string(v) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// openingEnd is where the messages fingerprint reads end in c's body: at
// its first user message, else at its last message. A span from the first
// message to there holds every byte fingerprint reads.
func openingEnd(c *wire.Conversation) int {
	for i := range c.Messages {
		if c.Messages[i].Role == wire.RoleUser {
			return c.Messages[i].End
		}
	}
	return c.Messages[len(c.Messages)-1].End
}

// fingerprint returns "fp-" + 16 hex digits identifying the opening of the
// conversation c, or "" when it has no system, developer or user message
// to identify it by.
func fingerprint(c *wire.Conversation, f wire.Format) string {
	h := sha256.New()
	found, leading := false, true
	for i := range c.Messages {
		m := &c.Messages[i]
		switch {
		case m.Role == wire.RoleUser:
		case leading && m.Role == wire.RoleInstruction:
		default:
			leading = false
			continue
		}
		found = true
		h.Write([]byte(m.WireRole))
		h.Write([]byte{0})
		if m.Items.End > m.Items.Start {
			h.Write([]byte(f.Text(c, m.Items.Start)))
		}
		h.Write([]byte{0})
		if m.Role == wire.RoleUser {
			break
		}
	}
	if !found {
		return ""
	}
	return "fp-" + hex.EncodeToString(h.Sum(nil))[:16]
}
