package compactor

import "github.com/ctxpress/ctxpress/wire"

// Message is the compactor's view of one message of a conversation, in
// the neutral terms of wire (its Role), whatever the wire format: the
// rewrite package converts the messages of a wire.Conversation to this.
type Message struct {
	Role       wire.Role  // what the message is, whatever its wire format calls it
	Text       string     // content flattened to text (string content, or the text parts joined with "\n"); "" when null
	ToolCalls  []ToolCall // assistant tool calls (a legacy function_call is one ToolCall with an empty ID)
	ToolCallID string     // for a tool result: the call it answers ("" when paired by name)
	Name       string     // a legacy result's function / the tool's name when known
	// Omit marks a message that is not part of the conversation (a
	// "/compact" command and ctxpress's own reply to it): it is never
	// forwarded, Transcript leaves it out and it is never a user turn.
	Omit bool
}

// ToolCall is one assistant tool call; Arguments is the raw JSON string.
type ToolCall struct{ ID, Name, Arguments string }

// isResult reports whether m answers a tool call (chat: role tool, or the
// legacy role function).
func (m *Message) isResult() bool { return m.Role == wire.RoleTool }

// isUser reports whether m is a user message of the conversation.
func (m *Message) isUser() bool { return m.Role == wire.RoleUser && !m.Omit }

// nearUser is how many messages Cut steps back, at most, to land right
// before a user message: a cut there is a whole user turn, which reads best
// both in the summary and in the raw tail.
const nearUser = 4

// LeadingSystem returns how many messages at the start are instructions
// (system/developer: they are never summarised, the summary block goes
// into them).
func LeadingSystem(msgs []Message) int {
	n := 0
	for n < len(msgs) && msgs[n].Role == wire.RoleInstruction {
		n++
	}
	return n
}

// Cut chooses which messages to summarise: [from, cut) are summarised,
// [cut, len) stay raw. from is the first message not covered yet (after the
// leading system messages and the current summary's coverage).
//
// The raw tail keeps at least the last keepRecent messages (and always one;
// Omit messages are not counted)
// and at least keepRecentTokens tokens as counted by tokens(i) (ignored when
// keepRecentTokens <= 0 or tokens is nil). The latest user message may fall
// inside [from, cut) when it is older than the raw tail, as the opening task of
// an agent loop is: the caller keeps it raw by placing it verbatim right after
// the summary (see LatestUserIn), so agent loops compact too. The
// cut sits on a turn boundary: no tool result at or after cut answers a call
// made before it (parallel calls included), so the first raw message is never
// an orphan tool result; when a user message is within nearUser messages
// before that point, the cut moves right before it.
//
// A from inside the leading system messages is moved past them. ok is
// false, with cut == from, when nothing can be summarised.
func Cut(msgs []Message, from, keepRecent, keepRecentTokens int, tokens func(i int) int) (cut int, ok bool) {
	n := len(msgs)
	from = max(from, LeadingSystem(msgs)) // the block goes into them: never summarised
	if from >= n {
		return from, false
	}
	// The tail is counted in messages that are forwarded: a "/compact"
	// exchange (Omit) in it would leave it short by two.
	hi := n
	for kept := 0; hi > from && kept < max(keepRecent, 1); {
		hi--
		if !msgs[hi].Omit {
			kept++
		}
	}
	if keepRecentTokens > 0 && tokens != nil {
		j, sum := n, 0
		for j > from && sum < keepRecentTokens {
			j--
			sum += tokens(j)
		}
		hi = min(hi, j)
	}
	if hi <= from {
		return from, false
	}
	return cutWithin(msgs, splits(msgs), from, hi)
}

// cutWithin is Cut's choice of a turn boundary in (from, hi], given the
// splits of msgs: the latest one, moved back before a user message when
// one is within nearUser.
func cutWithin(msgs []Message, split []bool, from, hi int) (cut int, ok bool) {
	for c := hi; c > from; c-- {
		if split[c] {
			continue
		}
		for u := c; u > from && u >= c-nearUser; u-- {
			if msgs[u].isUser() && !split[u] {
				return u, true
			}
		}
		return c, true
	}
	return from, false
}

// TrimHistory returns where a limit of maxMessages cuts msgs: the messages
// [LeadingSystem(msgs), cut) are left out, and cut is LeadingSystem(msgs)
// when nothing is (or maxMessages <= 0).
//
// It trims in blocks, so that the prompt cache survives: a history of more
// than maxMessages messages (after the leading system ones) is cut down to
// about half of them, and the cut then stays where it is until the
// messages after it are again more than maxMessages. Between two trims
// every request forwards the previous one's messages and its new ones. The
// cut is found from msgs alone, by replaying the history one message at a
// time, so it depends only on the prefix of msgs up to the last trim,
// which later turns do not change.
func TrimHistory(msgs []Message, maxMessages int) (cut int) {
	lead := LeadingSystem(msgs)
	if maxMessages <= 0 || len(msgs)-lead <= maxMessages {
		return lead
	}
	keep := max(maxMessages/2, 1)
	split := splits(msgs)
	cut = lead
	for end := lead + 1; end <= len(msgs); end++ {
		if end-cut <= maxMessages {
			continue
		}
		// The request that ended at end would forward too many: trim it.
		if c, ok := trimAt(msgs, split, cut, end, end-keep); ok {
			cut = c
		}
	}
	return cut
}

// trimAt returns the cut that trims the messages [from, end) to those from
// about target on: right before the user message nearest target within
// nearUser, else at the turn boundary nearest target; on a tie, the later
// one (fewer messages, so longer until the next trim). One message at
// least is kept.
func trimAt(msgs []Message, split []bool, from, end, target int) (cut int, ok bool) {
	nearest := func(reach int, good func(c int) bool) (int, bool) {
		for d := 0; d <= reach; d++ {
			if c := target + d; c < end && good(c) {
				return c, true
			}
			if c := target - d; d > 0 && c > from && good(c) {
				return c, true
			}
		}
		return from, false
	}
	if c, ok := nearest(nearUser, func(c int) bool { return msgs[c].isUser() && !split[c] }); ok {
		return c, true
	}
	return nearest(max(end-target, target-from), func(c int) bool { return !split[c] })
}

// LatestUserIn returns the index of the latest user message of msgs when it
// lies in [from, cut), i.e. when a compaction at cut would summarise it; -1
// otherwise. That message must be sent verbatim right after the summary: the
// latest user ask is never only paraphrased.
func LatestUserIn(msgs []Message, from, cut int) int {
	if u := lastUser(msgs); u >= from && u < cut {
		return u
	}
	return -1
}

// lastUser returns the index of the last user message (not an omitted
// one), or -1.
func lastUser(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].isUser() {
			return i
		}
	}
	return -1
}

// splits reports, for every cut position c in [0, len(msgs)], whether
// cutting there separates a tool call from one of its results or leaves a
// tool result as the first raw message. A result is paired with the latest
// earlier assistant message that made a call with its id; a result without a
// known id (legacy function results, sloppy clients) is paired with the
// nearest earlier assistant message, which keeps it with whoever asked.
func splits(msgs []Message) []bool {
	n := len(msgs)
	diff := make([]int, n+2)
	callAt := make(map[string]int)
	lastAssistant := -1
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Role == wire.RoleAssistant:
			lastAssistant = i
			for _, tc := range m.ToolCalls {
				if tc.ID != "" {
					callAt[tc.ID] = i
				}
			}
		case m.isResult():
			a, found := callAt[m.ToolCallID]
			if m.ToolCallID == "" || !found {
				a = lastAssistant
			}
			// Every c in (a, i] would put the call and this result on
			// different sides (a == -1: a result with no call at all, which
			// at least must not open the raw tail).
			diff[a+1]++
			diff[i+1]--
		}
	}
	out := make([]bool, n+1)
	run := 0
	for c := 0; c <= n; c++ {
		run += diff[c]
		out[c] = run > 0 || (c < n && msgs[c].isResult())
	}
	return out
}

// FitCut returns the first cut after from at which the raw tail [cut,
// len) counts at most budget tokens by tokens(i): where to cut a history
// that would not fit the model's window when summarising it cannot help.
// The cut sits on a turn boundary, as Cut's does. When no tail fits, it
// returns the last boundary that keeps at least one message; ok is false
// when there is no boundary after from at all.
func FitCut(msgs []Message, from, budget int, tokens func(i int) int) (cut int, ok bool) {
	n := len(msgs)
	from = max(from, LeadingSystem(msgs))
	split := splits(msgs)
	sum := 0
	for i := from; i < n; i++ {
		sum += tokens(i)
	}
	last := -1
	for c := from + 1; c < n; c++ {
		sum -= tokens(c - 1)
		if split[c] {
			continue
		}
		last = c
		if sum <= budget {
			return c, true
		}
	}
	if last < 0 {
		return from, false
	}
	return last, true
}
