package rewrite

import (
	"net/textproto"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire/messages"
)

// headers returns a case-insensitive header lookup, like fasthttp's Peek.
func headers(kv ...string) func(string) []byte {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[strings.ToLower(kv[i])] = kv[i+1]
	}
	return func(name string) []byte {
		if v, ok := m[strings.ToLower(name)]; ok {
			return []byte(v)
		}
		return nil
	}
}

// exactHeaders returns a case-sensitive lookup over the names as received.
func exactHeaders(kv ...string) func(string) []byte {
	return func(name string) []byte {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == name {
				return []byte(kv[i+1])
			}
		}
		return nil
	}
}

func TestIdentify(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","prompt_cache_key":"pck-1","messages":[{"role":"user","content":"hi"}]}`)
	noKey := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}]}`)
	long := strings.Repeat("a", MaxIDBytes+1)
	tests := []struct {
		name     string
		cfg      IdentifyConfig
		header   func(string) []byte
		body     []byte
		id, src  string
		rejected []string
	}{
		{"first configured header wins", IdentifyConfig{}, headers("thread-id", "t", "X-Session-ID", "s", "X-Conversation-ID", "c"), body, "c", "header:X-Conversation-ID", nil},
		{"opencode x-session-id, lower case", IdentifyConfig{}, headers("x-session-id", "ses_1"), body, "ses_1", "header:X-Session-ID", nil},
		{"older codex session_id", IdentifyConfig{}, headers("session_id", "uuid-1"), body, "uuid-1", "header:session_id", nil},
		{"Claude Code X-Claude-Code-Session-Id", IdentifyConfig{}, headers("X-Claude-Code-Session-Id", "e6861593-2e9a"), body, "e6861593-2e9a", "header:X-Claude-Code-Session-Id", nil},
		{"case-sensitive lookup, canonical spelling", IdentifyConfig{}, exactHeaders("X-Session-Id", "ses_2"), body, "ses_2", "header:X-Session-ID", nil},
		{"case-sensitive lookup, lower case", IdentifyConfig{}, exactHeaders("x-conversation-id", "c2"), body, "c2", "header:X-Conversation-ID", nil},
		{"configured headers only", IdentifyConfig{Headers: []string{"X-Chat"}}, headers("X-Session-ID", "s", "x-chat", "chat-1"), body, "chat-1", "header:X-Chat", nil},
		{"prompt_cache_key", IdentifyConfig{}, headers(), body, "pck-1", "body:prompt_cache_key", nil},
		{"nil header func", IdentifyConfig{}, nil, body, "pck-1", "body:prompt_cache_key", nil},
		{"empty header is absent", IdentifyConfig{}, headers("X-Session-ID", ""), body, "pck-1", "body:prompt_cache_key", nil},
		{"too long header rejected, next used", IdentifyConfig{}, headers("X-Conversation-ID", long, "thread-id", "t"), body, "t", "header:thread-id", []string{"header:X-Conversation-ID"}},
		{"control character rejected", IdentifyConfig{}, headers("X-Session-ID", "a\x01b"), body, "pck-1", "body:prompt_cache_key", []string{"header:X-Session-ID"}},
		{"fingerprint", IdentifyConfig{}, headers(), noKey, fingerprint(Parse(chatFormat, noKey).conv, chatFormat), "fingerprint", nil},
		{"header mode: no fingerprint", IdentifyConfig{Mode: ModeHeader}, headers(), noKey, "", "", nil},
		{"header mode keeps prompt_cache_key", IdentifyConfig{Mode: ModeHeader}, headers(), body, "pck-1", "body:prompt_cache_key", nil},
		{"bad prompt_cache_key rejected", IdentifyConfig{}, headers(), []byte(`{"prompt_cache_key":"` + long + `","messages":[{"role":"user","content":"hi"}]}`), "fp-", "fingerprint", []string{"body:prompt_cache_key"}},
		{"invalid body, no header", IdentifyConfig{}, headers(), []byte(`{nope`), "", "", nil},
		{"no messages to fingerprint", IdentifyConfig{}, headers(), []byte(`{"messages":[{"role":"assistant","content":"x"}]}`), "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Identify(tt.cfg, chatFormat, tt.header, tt.body)
			if !strings.HasPrefix(got.ID, tt.id) || (tt.id != "fp-" && got.ID != tt.id) || got.Source != tt.src {
				t.Errorf("got %q from %q, want %q from %q", got.ID, got.Source, tt.id, tt.src)
			}
			if strings.Join(got.Rejected, ",") != strings.Join(tt.rejected, ",") {
				t.Errorf("Rejected = %v, want %v", got.Rejected, tt.rejected)
			}
			// A Pipeline looks the headers up as it made them at New.
			viaPipeline := New(Config{Format: chatFormat, Identify: tt.cfg}).IdentifyParsed(tt.header, Parse(chatFormat, tt.body))
			if viaPipeline.ID != got.ID || viaPipeline.Source != got.Source || strings.Join(viaPipeline.Rejected, ",") != strings.Join(got.Rejected, ",") {
				t.Errorf("IdentifyParsed = %+v, Identify = %+v", viaPipeline, got)
			}
			// A lookup that ignores case finds each name in its first
			// spelling as in any other.
			if !strings.HasPrefix(tt.name, "case-sensitive lookup") {
				folded := New(Config{Format: chatFormat, Identify: tt.cfg}).IdentifyParsedFold(tt.header, Parse(chatFormat, tt.body))
				if folded.ID != got.ID || folded.Source != got.Source || strings.Join(folded.Rejected, ",") != strings.Join(got.Rejected, ",") {
					t.Errorf("IdentifyParsedFold = %+v, Identify = %+v", folded, got)
				}
			}
		})
	}
}

func TestFingerprintStableAcrossTurns(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent."}`
	dev := `{"role":"developer","content":[{"type":"text","text":"Use tools."}]}`
	first := `{"role":"user","content":"fix the bug"}`
	turn1 := chat("gpt-4o", sys, dev, first)
	// Later: more messages, the first user message gained a cache marker,
	// and whitespace differs.
	turn5 := chat("gpt-4o", sys, dev,
		`{"role":"user", "content":"fix the bug", "cache_control":{"type":"ephemeral"}}`,
		callMsg("c1", "bash", jsonString(`{"command":"ls"}`)), resultMsg("c1", "a.go"),
		`{"role":"user","content":"now test it"}`)
	id1 := Identify(IdentifyConfig{}, chatFormat, nil, turn1)
	id5 := Identify(IdentifyConfig{}, chatFormat, nil, turn5)
	if id1.Source != "fingerprint" || id1.ID != id5.ID || len(id1.ID) != len("fp-")+16 {
		t.Errorf("turn 1 %+v, turn 5 %+v", id1, id5)
	}
	other := Identify(IdentifyConfig{}, chatFormat, nil, chat("gpt-4o", sys, dev, `{"role":"user","content":"write docs"}`))
	if other.ID == id1.ID {
		t.Error("a different opening gives the same fingerprint")
	}
	// A system message later in the conversation is not part of it.
	late := Identify(IdentifyConfig{}, chatFormat, nil, chat("gpt-4o", sys, dev, first, `{"role":"system","content":"Command returned: ok"}`))
	if late.ID != id1.ID {
		t.Error("a later system message changed the fingerprint")
	}
}

func TestIdentifyCorpusFingerprints(t *testing.T) {
	for _, tr := range loadTraces(t) {
		full := Identify(IdentifyConfig{}, chatFormat, nil, tr.body)
		req, _ := parseRequest(tr.body)
		// The opening turn: leading system messages and the first user one.
		k := 0
		for k < len(req.messages) && req.messages[k].role != "user" {
			k++
		}
		early := Identify(IdentifyConfig{}, chatFormat, nil, prefixBody(t, tr.body, k+1))
		if full.Source != "fingerprint" || full.ID != early.ID {
			t.Errorf("%s: full %+v, first turn %+v", tr.name, full, early)
		}
	}
}

// A Pipeline remembers fingerprints by the opening's raw bytes: what it
// answers must be what the fingerprint of that very body is, when the
// opening repeats, changes, or repeats with a different rest.
func TestPipelineFingerprintIsTheBodysOwn(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent.\nBe brief."}`
	user := `{"role":"user","content":"fix the bug"}`
	bodies := [][]byte{
		chat("gpt-4o", sys, user),
		chat("gpt-4o", sys, user, callMsg("c1", "bash", jsonString(`{"command":"ls"}`)), resultMsg("c1", "a.go")),
		chat("gpt-4o", sys, `{"role":"user","content":"write docs"}`),
		chat("gpt-4o", `{"role":"system","content":"You are a coding agent.\nBe brief!"}`, user),
		chat("gpt-4o", sys, `{"role":"assistant","content":"hi"}`, `{"role":"system","content":"late"}`, user),
		chat("gpt-4o", sys, `{"role":"assistant","content":"hi"}`, `{"role":"system","content":"other"}`, user),
		chat("gpt-4o", sys),
		chat("gpt-4o", `{"role":"assistant","content":"no opening"}`),
		chat("gpt-4o", `{"role":"user","content":[{"type":"text","text":"fix the bug"}]}`),
	}
	for _, tr := range loadTraces(t) {
		bodies = append(bodies, tr.body)
	}
	p := New(Config{Format: chatFormat})
	for round := range 2 { // the second finds every opening remembered
		for i, body := range bodies {
			got := p.IdentifyParsed(nil, Parse(chatFormat, body))
			want := Identify(IdentifyConfig{}, chatFormat, nil, body)
			if got.ID != want.ID || got.Source != want.Source {
				t.Errorf("round %d, body %d: %+v, want %+v", round, i, got, want)
			}
		}
	}
}

func TestIdentifyConfigValidate(t *testing.T) {
	for _, c := range []IdentifyConfig{{}, {Mode: ModeAuto}, {Mode: ModeHeader, Headers: []string{"X-A"}}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []IdentifyConfig{{Mode: "magic"}, {Headers: []string{""}}, {Headers: []string{"a b"}}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// canonicalHeaderKey spells a header name as net/textproto does.
func TestCanonicalHeaderKeyMatchesTextproto(t *testing.T) {
	for _, name := range []string{"x-conversation-id", "X-SESSION-ID", "session_id", "thread-id", "x-claude-code-session-id",
		"Already-Canonical", "a--b", "-x", "", "has space", "ünicode", "x_y-z", "1-abc"} {
		if got, want := canonicalHeaderKey(name), textproto.CanonicalMIMEHeaderKey(name); got != want {
			t.Errorf("%q: %q, textproto %q", name, got, want)
		}
	}
}

// Claude Code names its session in metadata.user_id, a JSON string
// holding JSON: the conversation keeps its id from the first turn on,
// whatever the messages become.
func TestIdentifyClaudeCodeSessionFromTheBody(t *testing.T) {
	for _, tc := range []struct {
		name, body, id, src string
		rejected            []string
	}{
		{"Claude Code's session_id", `{"model":"m","metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"e686-1593\"}"},"messages":[{"role":"user","content":"hi"}]}`,
			"e686-1593", "body:metadata.user_id", nil},
		{"a plain user_id is no session: fingerprint", `{"model":"m","metadata":{"user_id":"user-7"},"messages":[{"role":"user","content":"hi"}]}`,
			"fp-", "fingerprint", nil},
		{"a session_id with a control character is refused", `{"model":"m","metadata":{"user_id":"{\"session_id\":\"a\\u0001b\"}"},"messages":[{"role":"user","content":"hi"}]}`,
			"fp-", "fingerprint", []string{"body:metadata.user_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Identify(IdentifyConfig{}, messages.Format{}, headers(), []byte(tc.body))
			if !strings.HasPrefix(got.ID, tc.id) || (tc.id != "fp-" && got.ID != tc.id) || got.Source != tc.src ||
				strings.Join(got.Rejected, ",") != strings.Join(tc.rejected, ",") {
				t.Errorf("got %+v, want %q from %q", got, tc.id, tc.src)
			}
		})
	}
	first := Identify(IdentifyConfig{}, messages.Format{}, nil, messagesCapture(t, "turn1"))
	last := Identify(IdentifyConfig{}, messages.Format{}, nil, messagesCapture(t, "turn6"))
	if first.ID != "e6861593-2e9a-4093-88fe-b8dea4fa358a" || last.ID != first.ID || last.Source != "body:metadata.user_id" {
		t.Errorf("turn 1 %+v, turn 6 %+v", first, last)
	}
}

// BenchmarkIdentifyFingerprint identifies the corpus traces by their
// opening, side by side: "memo" as a Pipeline does on every turn after the
// first, "sha256" decoding and hashing the opening each time.
// Run: go test -run '^$' -bench IdentifyFingerprint -benchmem ./rewrite/
func BenchmarkIdentifyFingerprint(b *testing.B) {
	traces := loadTraces(b)
	parsed := make([]*Parsed, len(traces))
	opening := 0
	for i, tr := range traces {
		parsed[i] = Parse(chatFormat, tr.body)
		opening += openingEnd(parsed[i].conv) - parsed[i].conv.Messages[0].Start
	}
	p := New(Config{Format: chatFormat})
	for name, identify := range map[string]func(*Parsed) Identity{
		"memo": func(pr *Parsed) Identity { return p.IdentifyParsed(nil, pr) },
		"sha256": func(pr *Parsed) Identity {
			return identify(IdentifyConfig{}, nil, nil, func() *Parsed { return pr }, fingerprint)
		},
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(opening / len(parsed)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if identify(parsed[i%len(parsed)]).ID == "" {
					b.Fatal("no fingerprint")
				}
			}
		})
	}
}
