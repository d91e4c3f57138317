package rewrite

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire"
)

// ownRoleNames is the chat adapter with names of its own for the roles, as
// a new wire format has (Anthropic's, Responses' items): the core must
// decide by the neutral Role alone.
type ownRoleNames struct{ wire.Format }

func (f ownRoleNames) Parse(body []byte) (*wire.Conversation, bool) {
	c, ok := f.Format.Parse(body)
	for i := range c.Messages {
		c.Messages[i].WireRole = "speaker " + c.Messages[i].Role.String()
	}
	return c, ok
}

// A format whose roles are not called system, user, assistant and tool
// compacts as chat does: the same cut, the same messages to summarise,
// the same latest ask and the same transcript. The compactor used to read
// the chat role names, so such a format had no leading instructions, no
// user turns and no tool results.
func TestCompactionOfAFormatWithItsOwnRoleNames(t *testing.T) {
	long := strings.Repeat("line of build output with some words in it\n", 60)
	body := chat("gpt-4o",
		`{"role":"system","content":"agent"}`,
		`{"role":"user","content":"build it"}`,
		callMsg("c1", "bash", jsonString(`{"command":"make"}`)), resultMsg("c1", long),
		callMsg("c2", "bash", jsonString(`{"command":"make test"}`)), resultMsg("c2", long),
		`{"role":"assistant","content":"built"}`, `{"role":"user","content":"now ship it"}`,
		callMsg("c3", "bash", jsonString(`{"command":"make ship"}`)), resultMsg("c3", "shipped"))
	compaction := func(f wire.Format) Compaction {
		p := New(Config{Format: f, Squasher: squashWith(truncSquash)})
		c, ok := p.RewriteWith(body, Options{}).Compaction(3, 0)
		if !ok {
			t.Fatalf("%T: no compaction", f)
		}
		return c
	}
	want, got := compaction(chatFormat), compaction(ownRoleNames{chatFormat})
	if got.From != want.From || got.Cut != want.Cut || got.Hash != want.Hash || got.LatestUserAsk != want.LatestUserAsk || got.KeptTokens != want.KeptTokens {
		t.Fatalf("own role names: from %d cut %d ask %q kept %d; chat: from %d cut %d ask %q kept %d",
			got.From, got.Cut, got.LatestUserAsk, got.KeptTokens, want.From, want.Cut, want.LatestUserAsk, want.KeptTokens)
	}
	if !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Errorf("the messages to summarise differ:\n%+v\n%+v", got.Messages, want.Messages)
	}
	if g, w := compactor.Transcript(got.Messages[got.From:got.Cut], 0), compactor.Transcript(want.Messages[want.From:want.Cut], 0); g != w {
		t.Errorf("transcript:\n%s\nwant:\n%s", g, w)
	}
}
