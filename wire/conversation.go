package wire

import (
	"bytes"
	"crypto/sha256"
	"sort"
)

// Conversation is a request body as the core reads it, whatever its wire
// format: the messages in order, each holding its items, with the byte
// spans of everything an edit may touch. Nothing is decoded into structs:
// the body is edited in place (Edit, Splice), so every byte the core does
// not change, unknown fields included, is copied as sent. A Conversation
// is read-only once Parse made it, and valid only while its body is.
type Conversation struct {
	Body   []byte
	Model  string
	Stream bool
	// Messages are the wire messages in order (chat: the elements of
	// `messages`). A cut or a drop happens only at message boundaries.
	Messages []Message
	// Items are the messages' items in order; Message.Items indexes them.
	Items []Item
	// Lead is how many messages at the start are instructions
	// (system/developer): they are never summarised, and the summary
	// block goes at their end.
	Lead int
	// SystemSlot reports that the instructions have a place of their own
	// outside the messages (Messages: the top-level `system`), which
	// AddInstructions always edits: the summary block goes there even
	// when Lead is 0.
	SystemSlot bool
	// CacheKey is the span of a conversation id the client sent in the
	// body (chat: `prompt_cache_key`); zero when none.
	CacheKey Span
	// SessionID is a conversation id the client sent inside another value
	// of the body (Messages: `metadata.user_id`, a JSON string holding
	// Claude Code's `session_id`), decoded; "" when none. Identify takes
	// it when there is no CacheKey.
	SessionID string
	// Counted are spans counted as their raw text and never changed
	// (chat: `tools`, legacy `functions`).
	Counted []Span
	// Priming is the tokens the format adds to every request besides
	// its messages and Counted (chat: the reply priming).
	Priming int
	// StandingInstructions reports that the instruction messages after
	// Lead stand for the rest of the conversation (Messages' role:"system"
	// messages: Claude Code's environment and CLAUDE.md): a summary or a
	// cut that leaves one out keeps its text verbatim at the end of the
	// instructions, and the compactor never summarises it.
	StandingInstructions bool
	// Bound reports that the upstream binds some items (Item.Bound) to
	// everything before them (Messages with thinking: a block's signature
	// covers system, tools and every earlier message). Every edit must then
	// be a function of the history before it, so that a message once sent
	// is sent alike on every later turn: dedup stubs the new duplicate,
	// never the earlier result. A format of such a history implements
	// Binder.
	Bound bool
	// ServerHistory reports that the request continues a history the
	// provider keeps and the body does not carry (Responses:
	// previous_response_id, conversation): what it carries may be squashed
	// and counted, but a summary or a cut would rewrite what it cannot see.
	ServerHistory bool
	// AfterCompaction is one past the message that holds the latest
	// compaction the provider made of the history (Responses' compaction
	// item, Messages' compaction block); 0 when there is none. No summary
	// or cut crosses it: the compaction and everything before it are sent
	// as the client placed them.
	AfterCompaction int
	// DropsBeforeCompaction reports that the provider reads nothing
	// before the latest compaction (Messages: the API drops every block
	// before it), so those messages are neither counted nor edited. The
	// Responses API reads the items before a compaction item (the user
	// messages /responses/compact keeps, codex's initial context).
	DropsBeforeCompaction bool
	// ProviderCompacts reports a request that asks the provider to compact
	// it (Responses' compaction_trigger item, a Messages context_management
	// compact edit): the client's own compaction, which ctxpress must not
	// summarise, cut or rescue, so that the provider answers exactly what
	// the client expects.
	ProviderCompacts bool
	// Resume is what the format that parsed the body keeps for a later
	// parse to continue from this one (Resumer); nil when it keeps nothing.
	Resume any
}

// Role is what a message is in the conversation, whatever the format
// calls it.
type Role uint8

// The roles.
const (
	RoleOther       Role = iota // not a message the core understands: passed on as sent
	RoleInstruction             // system, developer
	RoleUser
	RoleAssistant
	RoleTool // carries tool results
)

// String names the role, for logs and test failures.
func (r Role) String() string {
	switch r {
	case RoleInstruction:
		return "instruction"
	case RoleUser:
		return "user"
	case RoleAssistant:
		return "assistant"
	case RoleTool:
		return "tool"
	}
	return "other"
}

// Message is one wire message. (Its fields are ordered so it packs: a
// long history holds hundreds of them per request.)
type Message struct {
	Span // its bytes in the body
	Role Role
	// Object is false for an element that is not a JSON object: it has
	// no items, is counted as its raw text and is passed on as sent.
	Object bool
	// WireRole is the role as sent (chat: system, developer, user,
	// assistant, tool, function, …); "" when absent or not a string.
	WireRole string
	// Name is the message's participant name (chat: `name`, also the
	// function of a legacy result).
	Name string
	// Items are the indexes of its items in Conversation.Items.
	Items Range
}

// Range is the indexes [Start, End).
type Range struct{ Start, End int }

// Kind is what an item is.
type Kind uint8

// The kinds of items.
const (
	KindOpaque      Kind = iota // reasoning, thinking, images, unknown: counted, never edited
	KindInstruction             // system/developer text
	KindUser                    // user text (and its images and files)
	KindAssistant               // assistant text
	KindToolCall                // a call: CallID, Tool, Args
	KindToolResult              // a result: CallID (or ByName), Tool, Content
)

// Item is one piece of a message. (Packed as Message is.)
type Item struct {
	Kind Kind
	// ByName marks a result paired with the latest earlier call without
	// an id and of the same Tool (chat's legacy role function), not by
	// CallID.
	ByName bool
	// Bound marks an opaque item the upstream verifies against everything
	// before it (a thinking or redacted_thinking block): never edited;
	// left out only through Binder.LeaveOut.
	Bound   bool
	Message int  // index of the message it belongs to
	Span    Span // its bytes in the body
	// Content is the span of the content value of a text item or a tool
	// result: a string, an array of parts, null; zero when absent.
	Content Span
	// CallID is the id of a call, or of the call a result answers; ""
	// when the format gave none.
	CallID string
	// Tool is the name of the tool a call calls, or of a result's tool
	// when the format says it (chat: `name`).
	Tool string
	// Args is the span of a call's arguments as sent; zero when absent.
	Args Span
}

// Part is one part of an item's content.
type Part struct {
	// IsText marks a text part (a string content is one text part).
	IsText bool
	// Text is a text part's text, decoded.
	Text string
	// Span is a text part's JSON string in the body, which an edit may
	// replace by another JSON string; zero when it cannot be located
	// exactly (never edited then).
	Span Span
	// Tokens is another part's tokens, by the format's rules (an image's
	// nominal cost, an audio part's 0); 0 without a counter.
	Tokens int
}

// Count counts the tokens of a text (the core's cached counter, with the
// request's encoding).
type Count func(text string) int

// ItemCount is the tokens of item it's content as the core counted them
// (text parts by Count, the others as the format's Parts said), so that
// an adapter extending a content does not count it again.
type ItemCount func(it int) int

// Edit replaces the bytes [Start, End) with Repl.
type Edit struct {
	Start, End int
	Repl       []byte
}

// Splice returns body with each edit applied: the bytes between edits are
// copied as they are. edits must be sorted and must not overlap.
func Splice(body []byte, edits []Edit) []byte {
	// bytes.Join allocates the output without zeroing it first, as make
	// would: every byte is written anyway, and a body is megabytes.
	var small [9][]byte // up to 4 edits: the chunks on the stack
	chunks := small[:0]
	if n := 2*len(edits) + 1; n > len(small) {
		chunks = make([][]byte, 0, n)
	}
	last := 0
	for _, e := range edits {
		chunks = append(chunks, body[last:e.Start], e.Repl)
		last = e.End
	}
	return bytes.Join(append(chunks, body[last:]), nil)
}

// Format is one wire format's adapter: it reads a request body into a
// Conversation, answers the questions about it that depend on the format
// (how a message is counted, what its content says) and writes the core's
// edits back into the body. It must be pure and safe for concurrent use.
// MessagesWithin is how many of c's messages end within its first n bytes.
func (c *Conversation) MessagesWithin(n int) int {
	return sort.Search(len(c.Messages), func(i int) bool { return c.Messages[i].End > n })
}

// MessagesEndingAt is how many of c's messages end within its first at
// bytes, when the last of them ends exactly at at; 0 otherwise (a Resume
// from at then reads the body whole).
func (c *Conversation) MessagesEndingAt(at int) int {
	if k := c.MessagesWithin(at); k > 0 && c.Messages[k-1].End == at {
		return k
	}
	return 0
}

// TakeMessages starts c's messages and items with prev's first k messages
// and their items, with room for about more messages after them (and
// twice as many items). Taking all of prev's messages (a repeat) shares
// prev's slices, capped so that an append copies them: prev is never
// changed.
func (c *Conversation) TakeMessages(prev *Conversation, k, more int) {
	items := prev.Messages[k-1].Items.End
	if k == len(prev.Messages) {
		c.Messages, c.Items = prev.Messages[:k:k], prev.Items[:items:items]
		return
	}
	c.Messages = append(make([]Message, 0, k+more), prev.Messages[:k]...)
	c.Items = append(make([]Item, 0, items+2*more), prev.Items[:items]...)
}

// Resumer is a Format whose parse can continue an earlier one. Each of
// its conversations' Messages ends where an element of an array that is a
// member of the top-level object ends (chat: `messages`; Responses: `input`,
// whose reasoning item and the item after it are one message), so a body
// whose bytes up to the end of a message are an earlier body's can be
// validated (jsonvalid.ValidAfterElement) and read from there: a
// conversation's next request repeats the last one up to its new
// messages.
type Resumer interface {
	Format
	// Resume is Parse for a body (valid JSON) whose first at bytes are
	// those prev (a parse of this format) was read from, at being the end
	// of one of prev's messages: the messages up to there are prev's, and
	// only the rest of the body is read. taken is how many of prev's
	// messages begin the result (0: the body was read whole, as when a
	// later member replaces the messages). It never changes prev.
	Resume(body []byte, prev *Conversation, at int) (c *Conversation, chat bool, taken int)
}

type Format interface {
	// Name names the format ("chat"); memo keys include it.
	Name() string
	// Parse reads body (valid JSON) into a Conversation; false when body
	// is not a request of this format.
	Parse(body []byte) (*Conversation, bool)
	// Overhead is message m's tokens besides its items' contents:
	// framing, role, name, ids and tool calls (a non-object message: all
	// of it).
	Overhead(c *Conversation, m int, count Count) int
	// Parts is item it's content part by part; count (nil: none) counts
	// the parts that are not text.
	Parts(c *Conversation, it int, count Count) []Part
	// Text is item it's content as plain text: the string, or its text
	// parts joined by newlines.
	Text(c *Conversation, it int) string
	// Arguments is call item it's arguments as the model wrote them.
	Arguments(c *Conversation, it int) string
	// CanonicalArguments is call item it's arguments in a canonical form:
	// equal for calls whose arguments are the same JSON value.
	CanonicalArguments(c *Conversation, it int) []byte
	// Digest is the sha256 of message m's canonical form, as a chain hash
	// hashes it: stable across re-serialisation, changed by an edit.
	Digest(c *Conversation, m int) [sha256.Size]byte
	// ReplaceContent returns the edit that makes item it's content text,
	// in the content's shape (a string stays a string, parts become one
	// text part).
	ReplaceContent(c *Conversation, it int, text string) Edit
	// AddInstructions returns how texts (joined by blank lines) go at the
	// end of the leading instructions: the edit, or a message to insert
	// right after them when they have no place for it; and the tokens
	// this adds (counted says what a content it extends counted before).
	// With build false only the tokens are computed.
	AddInstructions(c *Conversation, texts []string, count Count, counted ItemCount, build bool) (ed *Edit, msg []byte, tokens int)
	// PrependText returns the edit, its offsets relative to the start of
	// message m (a user message), that puts text at the head of its
	// content, and the tokens this adds; false when its content has no
	// shape for it.
	PrependText(c *Conversation, m int, text string, count Count) (ed Edit, tokens int, ok bool)
	// NewMessage renders a message of role with text as its content, and
	// counts it.
	NewMessage(role Role, text string, count Count) (msg []byte, tokens int)
	// ReplaceMessages returns the edit that replaces messages [from, to)
	// by msgs (each a whole message: new, or copied), the separators
	// kept right; false when there is nothing to do.
	ReplaceMessages(c *Conversation, from, to int, msgs [][]byte) (Edit, bool)
	// DropMessages returns the edit that leaves out messages [from, to),
	// from > 0, with the separator before them.
	DropMessages(c *Conversation, from, to int) Edit
}

// Binder is implemented by a format whose conversations may be Bound.
// When the history before a bound item changes (a summary, a cut), the
// upstream refuses the item unless it is left out, or the request asks it
// to drop such items instead.
type Binder interface {
	// LeaveOut returns the edits, their offsets relative to the start of
	// message m, that leave out its bound items with their separators,
	// and the tokens this removes; false when it has none, or nothing else
	// (it would be left without content).
	LeaveOut(c *Conversation, m int, count Count) (eds []Edit, tokens int, ok bool)
	// DropMismatched returns the edit that asks the upstream to drop the
	// bound items whose history changed rather than refuse the request
	// (Messages: thinking.block_binding.prefix_mismatch_behavior
	// "drop_block"); false when the request already asks so or has no
	// place for it.
	DropMismatched(c *Conversation) (ed Edit, ok bool)
}

// ProviderReads reports whether the provider reads message m: all of them
// but, where the provider drops them, those before its latest compaction.
func (c *Conversation) ProviderReads(m int) bool {
	return !c.DropsBeforeCompaction || m >= c.AfterCompaction-1
}

// Bytes returns message m's bytes as sent.
func (c *Conversation) Bytes(m int) []byte { return c.Messages[m].Of(c.Body) }

// ItemsOf returns the items of message m.
func (c *Conversation) ItemsOf(m int) []Item {
	r := c.Messages[m].Items
	return c.Items[r.Start:r.End]
}

// Result returns the index of message m's first tool result item, -1 when
// it carries none.
func (c *Conversation) Result(m int) int {
	r := c.Messages[m].Items
	for i := r.Start; i < r.End; i++ {
		if c.Items[i].Kind == KindToolResult {
			return i
		}
	}
	return -1
}
