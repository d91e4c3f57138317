package rewrite

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/wire"
)

// Summary placements (Options.Placement).
const (
	// PlacementAuto ("" too) is PlacementSystem when the client sent a
	// leading system or developer message or the format has a place for
	// instructions outside the messages (Anthropic's top-level system),
	// else PlacementUser: a client that sends no system message may be
	// talking to a template or model without a system role, which would
	// refuse one.
	PlacementAuto = "auto"
	// PlacementSystem ends the last leading system message with the block,
	// or sends a new system message when the client sent none.
	PlacementSystem = "system"
	// PlacementUser puts the block at the head of the first user message
	// forwarded after the leading system messages (the re-sent ask or the
	// first kept one), a blank line before the client's text (a text part
	// first, for an array content); a user message of its own only when no
	// user message follows. It never sends two user messages in a row,
	// which strict chat templates refuse.
	PlacementUser = "user"
)

// Options are the per-conversation choices of RewriteWith. The zero Options
// is squash, dedup and counts only.
type Options struct {
	// Branches are the stored summaries of this conversation. The one with
	// the largest Covered whose Hash equals the request's own chain hash
	// after Covered messages is applied; none matching sets
	// Result.SummaryMiss and forwards the history as sent.
	Branches []history.Branch
	// Placement is PlacementAuto ("" or anything unknown too),
	// PlacementSystem or PlacementUser.
	Placement string
	// ConciseOutput appends ConciseInstruction to the last leading system
	// message (before the summary block). Without one it goes where the
	// block would: a new system message (PlacementSystem), else the head of
	// the first forwarded user message, before the block.
	ConciseOutput bool
	// MaxHistoryMessages > 0, when no summary is applied, trims the history
	// in blocks (compactor.TrimHistory): past MaxHistoryMessages messages
	// after the leading system ones, the oldest are left out down to about
	// half, and the cut then stays until the limit is passed again, so the
	// requests in between extend each other byte for byte. When the first
	// kept message is not a user message, the latest user message before
	// the cut is re-sent verbatim in front of it.
	MaxHistoryMessages int
	// ForceCommand makes a last user message that is exactly "/compact"
	// (trimmed) a command: Result.CompactCommand, and Result.Compaction
	// plans without it.
	ForceCommand bool
	// PrevDedups is Result.Dedups of the previous request of this history
	// that was forwarded (nil when unknown: the first turn, or no state).
	// Its dedups stay applied (a message once sent as DedupPlaceholder is
	// sent so on every later turn) and DedupConfig.MinTokens applies only
	// to the dedups this request adds over them, so a small new dedup does
	// not rewrite an old, cached message. A mark whose message changed
	// (the history was edited or rewound) does not count.
	PrevDedups []history.DedupMark
	// PrevPrunes is Result.Prunes of the previous forwarded request of
	// this history (nil when unknown): those results stay pruned, and a
	// request that opens a new user turn decides, once, whether to prune
	// the others from before its ask (PruneConfig).
	PrevPrunes []history.PruneMark
	// Economics, when set, is the cost model's view of the conversation:
	// the steps that rewrite what was already sent (dedup of an earlier
	// result, pruning) are taken only when it says they pay for the cache
	// they break. nil: no cost information, only their minimums apply.
	Economics *Economics
	// FitTokens > 0 is the most the forwarded request may count: when the
	// request (its summary applied, squashed, deduped) would count more,
	// the oldest client messages after the leading system messages and the
	// summary's coverage are left out, on a turn boundary, until it fits;
	// the latest user ask is re-sent as after a summary, and FitNote says
	// how many were left out (Result.FitDropped). The proxy sets it only
	// for a request it knows will not fit the model's window and cannot
	// compact: losing old turns beats losing the request.
	FitTokens int
}

// FitNote is the line that tells the model messages were left out to fit
// its window; %d is how many.
const FitNote = "[ctxpress: the %d oldest messages of this conversation were left out to fit the model's context window]"

// CompactCommandText is the user message that asks ctxpress to compact now.
const CompactCommandText = "/compact"

// CompactReplyPrefix starts ctxpress's own reply to CompactCommandText.
// A "/compact" user message directly followed by an assistant message
// starting with it is ctxpress's exchange, not the conversation's: later
// requests that carry the pair do not forward it, and neither summaries
// nor counts include it.
const CompactReplyPrefix = "[ctxpress]"

// ConciseInstruction is what Options.ConciseOutput adds to the system
// prompt. It is a constant so the prompt, and the provider's cache of it,
// stays the same from turn to turn. Brevity must never cost exactness
// (code, paths and errors are copied, not paraphrased) nor safety (a
// terse confirmation of `rm -rf` is how accidents happen).
const ConciseInstruction = "Answer concisely: drop filler, pleasantries, articles and hedging; prefer short sentences, fragments and lists. " +
	"Keep code, commands, file paths, identifiers and error text byte-exact. " +
	"Never be terse when confirming a destructive operation or giving a security warning: state those in full."

// chainStep is h_i from h_(i-1) and the canonical digest of message i. It
// chains digests rather than canonical bytes so that a warm turn hashes 64
// bytes per message, not the whole history.
func chainStep(prev, digest [sha256.Size]byte) [sha256.Size]byte {
	var buf [2 * sha256.Size]byte
	copy(buf[:sha256.Size], prev[:])
	copy(buf[sha256.Size:], digest[:])
	return sha256.Sum256(buf[:])
}

// view is what RewriteWith learnt about one request, kept in its Result for
// Compaction and SummaryTokens. It is not changed after RewriteWith returns,
// so a Result may be used from several goroutines.
type view struct {
	p       *Pipeline
	enc     Encoding
	req     *request // &own: the conversation, its format and counter
	own     request  // the view and its request are one allocation
	a       *analysis
	user    bool // the block goes at the head of a user message (PlacementUser, resolved)
	concise bool
	lead    int
	command bool   // the last message is the /compact command
	omit    []bool // the /compact exchanges left out, by message; nil when none

	applied int                  // index of the applied branch, -1
	missed  bool                 // branches were given and none applies
	branch  *history.Branch      // the applied branch, nil when none
	dropTo  int                  // client messages [lead, dropTo) are not forwarded
	resend  int                  // the user message re-sent verbatim after them, -1
	chain   [][sha256.Size]byte  // h_0 … h_k for the k matching needed; capacity clipped
	h0      [1][sha256.Size]byte // h_0, chain's first backing array: no allocation of its own

	// keys are the chain memo's keys of the whole history (chainKeys),
	// made while matching branches so that HistoryChain, which extends the
	// same chain to the end, does not hash the history again; nil when no
	// branch was matched.
	keys []cacheKey

	fitNote string // FitNote when FitTokens left messages out, else ""

	fixed int   // tokens of the request besides its messages
	fwd   []int // tokens of each message as forwarded (squashed, deduped)
	// fwdSmall backs fwd for a request of up to smallAnalysis messages.
	fwdSmall [smallAnalysis]int
	dedup    dedupPlan // the tool results dedup replaces (and prune's, as stubs)
	prune    prunePlan // which of them prune replaced
}

// newView sets v up for its request (v.own): the leading system messages,
// the resolved placement, the /compact exchanges to leave out and the
// command. It builds no per-message skeleton: only the history limit, fit
// and a compaction need one (skeleton), and most requests use neither.
func (p *Pipeline) newView(enc Encoding, v *view, a *analysis, opts Options) {
	v.p, v.enc, v.req, v.a, v.applied, v.resend, v.concise = p, enc, &v.own, a, -1, -1, opts.ConciseOutput
	req := v.req
	n := len(req.Messages)
	v.lead = max(req.Lead, providerLead(req.Conversation))
	v.dropTo = v.lead
	v.chain = v.h0[:]
	v.fixed = p.counter.fixedTokens(req)
	switch opts.Placement {
	case PlacementSystem:
	case PlacementUser:
		v.user = true
	default:
		// Without leading instructions the block goes into a user message,
		// unless the format has a place for instructions of its own.
		v.user = v.lead == 0 && !req.SystemSlot
	}
	for i := v.lead; i+1 < n; i++ {
		// The reply's role first: it is cheaper to look at than a command.
		if req.Messages[i+1].Role == wire.RoleAssistant && isCommand(req, i) && isCompactReply(req, i+1) {
			if v.omit == nil {
				v.omit = make([]bool, n)
			}
			v.omit[i], v.omit[i+1] = true, true
			i++
		}
	}
	v.command = opts.ForceCommand && n > 0 && isCommand(req, n-1)
}

// providerLead is where a provider compaction puts the start of what
// ctxpress may summarise or cut (0 when there is none): right after the
// message holding the compaction, and past every later message that
// answers a call made before that point, so that no cut there separates a
// call from its output.
func providerLead(c *wire.Conversation) int {
	lead := c.AfterCompaction
	if lead == 0 {
		return 0
	}
	before := make(map[string]bool) // the calls made before lead
	for m := range c.Messages {
		items := c.ItemsOf(m)
		if m >= lead {
			for _, it := range items {
				if it.Kind == wire.KindToolResult && before[it.CallID] {
					lead = m + 1
				}
			}
		}
		if m < lead {
			for _, it := range items {
				if it.Kind == wire.KindToolCall && it.CallID != "" {
					before[it.CallID] = true
				}
			}
		}
	}
	return lead
}

// omitted reports whether message i is part of a /compact exchange, which
// is never forwarded.
func (v *view) omitted(i int) bool { return v.omit != nil && v.omit[i] }

// isUser reports whether message i is a user message of the conversation
// (not an omitted one), as compactor's rules read a Message.
func (v *view) isUser(i int) bool {
	return v.req.Messages[i].Role == wire.RoleUser && !v.omitted(i)
}

// skeleton returns the messages as compactor cuts them: role, ids, calls
// and Omit, no text. It allocates a message per message of the request,
// so only the steps that cut (the history limit, fit, a compaction) ask
// for it.
func (v *view) skeleton() []compactor.Message {
	req, a := v.req, v.a
	msgs := make([]compactor.Message, len(req.Messages))
	ncalls := 0
	for _, f := range a.facts {
		ncalls += len(f.calls)
	}
	calls := make([]compactor.ToolCall, 0, ncalls) // one backing array for all messages
	for i := range req.Messages {
		m := &req.Messages[i]
		cm := &msgs[i]
		cm.Role, cm.Name, cm.Omit = m.Role, m.Name, v.omitted(i)
		if i < v.lead {
			// Never cut nor summarised (instructions, or up to a provider
			// compaction): the compactor reads them as the leading ones.
			cm.Role = wire.RoleInstruction
		}
		if r := req.Result(i); r >= 0 {
			cm.ToolCallID = req.Items[r].CallID
		}
		if fc := a.facts[i].calls; len(fc) > 0 {
			start := len(calls)
			for _, c := range fc {
				calls = append(calls, compactor.ToolCall{ID: c.id, Name: c.key.tool})
			}
			cm.ToolCalls = calls[start:len(calls):len(calls)]
		}
	}
	return msgs
}

// isCommand reports whether message i is a user message that is exactly
// CompactCommandText (trimmed): a string, or text parts that are the
// command and <system-reminder> blocks the client adds to what the user
// typed (qwen-code adds its skills list and the date to the first message
// of every run).
func isCommand(req *request, i int) bool {
	m := &req.Messages[i]
	if m.Role != wire.RoleUser || m.Items.End == m.Items.Start {
		return false
	}
	it := m.Items.Start
	content := req.Items[it].Content
	if !content.Exists() {
		return false
	}
	raw := content.Of(req.Body)
	// A command is a few bytes: without them a content is not parsed, and
	// a long string is not searched for them.
	if raw[0] != '[' && len(raw) > 512 || !bytes.Contains(raw, []byte(CompactCommandText)) {
		return false
	}
	if raw[0] != '[' {
		return strings.TrimSpace(req.f.Text(req.Conversation, it)) == CompactCommandText
	}
	command, others := 0, 0
	for _, part := range req.f.Parts(req.Conversation, it, nil) {
		switch text := strings.TrimSpace(part.Text); {
		case part.IsText && text == CompactCommandText:
			command++
		case part.IsText && isSystemReminder(text):
		default:
			others++
		}
	}
	return command == 1 && others == 0
}

// isSystemReminder reports whether a text part is a block a client added
// to the user's message (Claude Code and qwen-code wrap them so).
func isSystemReminder(text string) bool {
	return strings.HasPrefix(text, "<system-reminder>") && strings.HasSuffix(text, "</system-reminder>")
}

// isCompactReply reports whether message i is ctxpress's reply to a
// command: an assistant message without calls whose text starts with
// CompactReplyPrefix.
func isCompactReply(req *request, i int) bool {
	m := &req.Messages[i]
	if m.Role != wire.RoleAssistant || m.Items.End-m.Items.Start != 1 {
		return false
	}
	it := m.Items.Start
	if !req.Items[it].Content.Exists() {
		return false
	}
	return strings.HasPrefix(strings.TrimLeft(req.f.Text(req.Conversation, it), " \t\r\n"), CompactReplyPrefix)
}

// selectHistory decides which client messages are forwarded: the longest
// matching branch replaces the messages it covers; without one, the history
// limit drops the oldest, in blocks. When the first message kept is not a
// user message, the latest covered or dropped user message is re-sent
// verbatim.
func (v *view) selectHistory(branches []history.Branch, maxHistory int) {
	n := len(v.req.Messages)
	longest := 0
	for _, b := range branches {
		if b.Covered > 0 && v.lead+b.Covered <= n {
			longest = max(longest, b.Covered)
		}
	}
	if longest > 0 {
		whole := n - v.lead
		v.keys = v.chainKeys(make([]cacheKey, 0, whole+1), whole)
		v.chain = slices.Clip(v.extendChain(v.chain, longest))
		for i := range branches {
			b := &branches[i]
			if b.Covered <= 0 || v.lead+b.Covered > n || b.Hash != v.chain[b.Covered] {
				continue
			}
			if v.applied < 0 || b.Covered > branches[v.applied].Covered {
				v.applied = i
			}
		}
	}
	v.missed = len(branches) > 0 && v.applied < 0
	switch {
	case v.applied >= 0:
		b := branches[v.applied]
		v.branch = &b
		v.dropTo = v.lead + b.Covered
	case maxHistory > 0:
		v.dropTo = v.pastStanding(compactor.TrimHistory(v.skeleton(), maxHistory))
	}
	if v.dropTo > v.lead {
		v.resend = v.resendAfter(v.dropTo, n)
	}
}

// extendChain returns chain (h_0 … h_j) extended to h_k. It appends to
// chain, so callers that share chain pass it clipped.
//
// An agent re-sends its history with a message or two more each turn, and
// each step is a sha256 and a digest lookup: a 200-message history took
// ~60 us a turn. So whole chains are remembered by the bytes of the
// messages they cover (chainKeys: a rolling hash over the messages'
// content hashes, a few ns a message), and a turn steps only past the
// longest of the last chainLookback prefixes that was remembered.
func (v *view) extendChain(chain [][sha256.Size]byte, k int) [][sha256.Size]byte {
	j := len(chain) - 1
	if j >= k {
		return chain
	}
	keys := v.keys
	if len(keys) <= k {
		var small [16]cacheKey
		keys = small[:0]
		if k+1 > len(small) {
			keys = make([]cacheKey, 0, k+1)
		}
		keys = v.chainKeys(keys, k)
	}
	from := j
	for m := k; m > j && m > k-chainLookback; m-- {
		if got, ok := v.p.cache.get(keys[m]); ok && len(got.([][sha256.Size]byte)) > m {
			chain = append(chain, got.([][sha256.Size]byte)[j+1:m+1]...)
			from = m
			break
		}
	}
	for i := from; i < k; i++ {
		jm := v.lead + i
		chain = append(chain, chainStep(chain[i], v.p.messageDigest(v.req, jm, v.a.hashes[jm])))
	}
	if from < k {
		// Its own copy: the caller may append to chain.
		kept := slices.Clone(chain)
		v.p.cache.add(keys[k], kept, int64(len(kept))*sha256.Size)
	}
	return chain
}

// chainLookback is how many of a request's longest prefixes extendChain
// looks up: a turn adds a few messages, a retry none.
const chainLookback = 8

// chainKeys appends to keys the memo keys of chains h_0 … h_m for m = 0 … k:
// the format, then the content hashes of messages lead … lead+m-1, folded
// one by one, so a key names the exact bytes its chain was made from.
func (v *view) chainKeys(keys []cacheKey, k int) []cacheKey {
	key := newKey(kindChain, v.req.f.Name())
	keys = append(keys, key)
	var buf [1 + len(cacheKey{}) + len(contentHash{})]byte
	buf[0] = kindChain
	for i := 0; i < k; i++ {
		copy(buf[1:], key[:])
		copy(buf[1+len(key):], v.a.hashes[v.lead+i][:])
		for s, seed := range keySeeds {
			binary.LittleEndian.PutUint64(key[8*s:], maphash.Bytes(seed, buf[:]))
		}
		keys = append(keys, key)
	}
	return keys
}

// messageDigest is the format's canonical digest of message i, whose
// bytes hash to h, from the cache when it was seen before: a warm turn
// canonicalises only its new messages.
func (p *Pipeline) messageDigest(req *request, i int, h contentHash) [sha256.Size]byte {
	key := newKey(kindCanonical, req.f.Name(), string(h[:]))
	if v, ok := p.cache.get(key); ok {
		return v.([sha256.Size]byte)
	}
	d := req.f.Digest(req.Conversation, i)
	p.cache.add(key, d, sha256.Size)
	return d
}

// forwarded records each message's tokens as forwarded under plan (for a
// message a summary or the history limit leaves out: as it would be,
// squashed; for an Omit message: 0).
func (v *view) forwarded(plan dedupPlan) {
	v.dedup = plan
	if n := len(v.a.facts); n <= len(v.fwdSmall) {
		v.fwd = v.fwdSmall[:n]
		clear(v.fwd) // a fit forwards again
	} else {
		v.fwd = make([]int, n)
	}
	for i, f := range v.a.facts {
		switch {
		case v.omitted(i), !v.req.ProviderReads(i):
			// Never forwarded, or never read by the provider (before its
			// compaction): 0 keeps it out of every sum.
		case plan.replace[i]:
			v.fwd[i] = plan.forwardedTokens(v.req, i, f)
		default:
			v.fwd[i] = f.after
		}
	}
}

// resendAfter returns the covered user message to re-send verbatim after
// a summary (or a history cut) covering messages [lead, cut) of the first
// n, or -1. When the first message kept is not a user message (an agent
// loop's tail is tool calls and results), the last covered user ask is
// re-sent: the request needs a user message, strict templates want one
// first, and the ask must never be only paraphrased. The rule looks at the
// coverage and at the first message kept alone, which later turns do not
// change, so the forwarded prefix stays stable from turn to turn. It is
// compactor.LatestUserIn's rule, read off the conversation.
func (v *view) resendAfter(cut, n int) int {
	if f := v.firstKept(cut, n); f < n && v.isUser(f) {
		return -1
	}
	for u := cut - 1; u >= v.lead; u-- {
		if v.isUser(u) {
			return u
		}
	}
	return -1
}

// firstKept returns the first of the first n messages at or after cut that
// is not omitted (n when none): the first client message forwarded after
// a cut.
func (v *view) firstKept(cut, n int) int {
	for cut < n && v.omitted(cut) {
		cut++
	}
	return cut
}
