package rewrite

import (
	"crypto/sha256"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
)

// Pipeline rewrites request bodies, over the neutral conversation a wire
// adapter reads out of them. It is safe for concurrent use; its caches are
// shared by all requests.
type Pipeline struct {
	cfg      Config
	readOnly map[string]bool  // Dedup.ReadOnlyTools as a set; immutable
	cache    *lru             // squash results, token counts, message memos
	parses   *parseMemo       // recent parses by their bodies' prefixes; nil: none
	counter  *Counter         // counts with cache
	squasher Squasher         // nil: no squash
	shell    *squash.Squasher // knows the shell tools, which commands only look (dedup), what squash keeps whole and the pruned lines (prune)
	headers  []headerName     // the conversation headers as IdentifyParsed looks them up; immutable
	folded   []headerName     // headers, one spelling each (IdentifyParsedFold); immutable
}

// New returns a Pipeline for cfg. cfg should have passed Validate; an
// unknown identify mode is treated as ModeAuto. A nil cfg.Format is a
// programming error, and New panics on it rather than build a Pipeline
// that silently understands no body.
func New(cfg Config) *Pipeline {
	if cfg.Format == nil {
		panic("rewrite.New: Config.Format is nil; a Pipeline needs the wire adapter it reads bodies with (e.g. chat.Format{})")
	}
	size := cfg.CacheBytes
	if size == 0 {
		size = DefaultCacheBytes
	}
	// The parses share the bound: they hold only what a request's parse
	// made anyway (its messages and items), one per conversation.
	parseBytes := size / 16
	cache := newLRU(size - parseBytes)
	p := &Pipeline{
		cfg:      cfg,
		parses:   newParseMemo(parseBytes),
		readOnly: cfg.Dedup.readOnlySet(),
		cache:    cache,
		counter:  newCounter(cache),
		squasher: cfg.Squasher,
		shell:    squash.New(shellConfig(cfg.Squash, cfg.Expand)),
		headers:  headerNamesOf(cfg.Identify),
		folded:   foldedNames(headerNamesOf(cfg.Identify)),
	}
	if p.squasher == nil && cfg.Squash != nil {
		sc := *cfg.Squash
		sc.Ways = cfg.Expand
		if sc.CountTokens == nil {
			sc.CountTokens = func(s string) int { return p.counter.Count(O200K, s) }
		}
		p.squasher = squash.New(sc)
	}
	return p
}

// shellConfig is the part of the squash config dedup's shell rule and
// prune read: the shell tools and read commands, and what squash keeps
// whole (exempt tools, reads); squash's defaults when squash is off.
func shellConfig(sc *squash.Config, ways *expand.Ways) squash.Config {
	if sc == nil {
		return squash.Config{Ways: ways}
	}
	return squash.Config{ShellTools: sc.ShellTools, ReadCommands: sc.ReadCommands, ExemptTools: sc.ExemptTools, ReadMaxBytes: sc.ReadMaxBytes, Ways: ways}
}

// CacheStats reports the entries in the pipeline's cache, the bytes they
// account for and the bound on those bytes (Config.CacheBytes).
func (p *Pipeline) CacheStats() (entries int, bytes, limit int64) {
	entries, bytes = p.cache.stats()
	pe, pb := p.parses.stats()
	limit = p.cache.max
	if p.parses != nil {
		limit += p.parses.max
	}
	return entries + pe, bytes + pb, max(limit, 0)
}

// Counter returns the pipeline's token counter; it shares the pipeline's
// cache.
func (p *Pipeline) Counter() *Counter { return p.counter }

// IdentifyParsed is Identify, with the pipeline's IdentifyConfig, on a body
// already parsed.
func (p *Pipeline) IdentifyParsed(header func(name string) []byte, parsed *Parsed) Identity {
	return identify(p.cfg.Identify, p.headers, header, func() *Parsed { return parsed }, p.fingerprint)
}

// IdentifyParsedFold is IdentifyParsed for a header lookup that ignores
// the case of names (fasthttp's, net/http's): every spelling of a name
// finds the same value there, so each name is looked up once.
func (p *Pipeline) IdentifyParsedFold(header func(name string) []byte, parsed *Parsed) Identity {
	return identify(p.cfg.Identify, p.folded, header, func() *Parsed { return parsed }, p.fingerprint)
}

// fingerprint is the package's fingerprint memoized on the bytes of the
// opening messages it reads: an agent sends the same opening on every turn
// of a conversation, and its system prompt (tens of kilobytes for some)
// would be decoded and run through sha256 each time, where the memo's key
// is two maphashes of its raw bytes.
func (p *Pipeline) fingerprint(c *wire.Conversation, f wire.Format) string {
	if len(c.Messages) == 0 {
		return ""
	}
	key := bytesKey(kindOpening, f.Name(), c.Body[c.Messages[0].Start:openingEnd(c)])
	if v, ok := p.cache.get(key); ok {
		return v.(string)
	}
	fp := fingerprint(c, f)
	p.cache.add(key, fp, int64(len(fp)))
	return fp
}

// Result is the outcome of Rewrite and RewriteWith.
type Result struct {
	// Body is the body to forward: the input itself when nothing changed.
	Body []byte
	// Understood is false when the body is not valid JSON or not a chat
	// request (no `messages` array); Body is then the input, unchanged, and
	// the other fields are zero but for BytesBefore, BytesAfter and Applied.
	Understood bool
	// Changed reports whether Body differs from the input.
	Changed bool
	Model   string
	Stream  bool
	// Messages is the length of `messages` as the client sent it.
	Messages int
	// TokensBefore is the estimate for the request as the client sent it,
	// TokensAfter for Body (see Counter.CountRequest).
	TokensBefore, TokensAfter int
	// Squashed counts the tool outputs (texts) squashed in Body; Deduped the
	// tool results replaced by DedupPlaceholder.
	Squashed, Deduped int
	// SquashStats has one entry per text counted in Squashed: its shape
	// (the squasher's) and content tokens before and after.
	SquashStats []SquashStat
	// DedupSavedTokens is what the dedups counted in Deduped saved.
	DedupSavedTokens int
	// FitDropped is how many client messages Options.FitTokens left out
	// (after a summary's coverage); 0 when the request fitted.
	FitDropped int
	// Dedups names the tool results Body sends as DedupPlaceholder (by
	// message index and place among its results, in body order; nil when
	// none). Whoever forwards Body keeps it with the
	// history and passes it as Options.PrevDedups to the next request of
	// that history, so the dedups stay sticky and the minimum applies to
	// new ones only. A Body that is not forwarded (a command answered by
	// ctxpress) must not replace the kept list.
	Dedups []history.DedupMark
	// Pruned counts the tool results Body sends as their pruned line
	// (PruneConfig), PruneSavedTokens what that saves; they are not in
	// Deduped and DedupSavedTokens. PruneDeclined is how many results
	// this request's batch would have pruned had the cost model
	// (Options.Economics) said it pays.
	Pruned, PruneSavedTokens, PruneDeclined int
	// Prunes names the tool results Body sends pruned (and those an
	// earlier request pruned that a summary now covers), in body order;
	// nil when none. It is kept and passed back as Options.PrevPrunes,
	// as Dedups is.
	Prunes []history.PruneMark
	// Originals are what the markers of Body point to (Config.Expand; nil
	// without it): every squashed, pruned or deduped tool output forwarded,
	// each time, for the caller to keep those it has not kept yet.
	Originals               []Original
	BytesBefore, BytesAfter int

	// Lead is the number of leading system/developer messages of the
	// client's request (compactor.LeadingSystem): never summarised.
	Lead int
	// Applied is the index into Options.Branches of the summary applied,
	// -1 when none; Covered is how many client messages it replaced.
	Applied, Covered int
	// SummaryMiss reports that branches were given but none matched this
	// request's history: the client edited, truncated or rewound it.
	SummaryMiss bool
	// ServerHistory reports a request that continues a history the
	// provider keeps (wire.Conversation.ServerHistory): it was squashed,
	// deduped and counted only, and must never be compacted or cut.
	ServerHistory bool
	// ProviderCompacts reports a request that asks the provider to compact
	// it (wire.Conversation.ProviderCompacts): the client's own
	// compaction, never compacted, cut to fit or rescued (what earlier
	// requests sent stays: a summary applied, dedups, prunes), and its
	// usage is the compaction's, not the request's.
	ProviderCompacts bool
	// CompactCommand reports that the last message is a user message that
	// is exactly "/compact" (only with Options.ForceCommand).
	CompactCommand bool
	// Trimmed is how many client messages Options.MaxHistoryMessages left
	// out of Body (a re-sent latest user message is not counted).
	Trimmed int
	// ThinkingLeftOut is how many kept messages of a bound history
	// (wire.Conversation.Bound) Body sends without their thinking blocks:
	// those of user turns before the applied summary's compaction, whose
	// prefix the summary changed.
	ThinkingLeftOut int
	// DropMismatched reports that Body asks the upstream to drop the
	// thinking blocks whose prefix changed rather than refuse the request
	// (thinking.block_binding.prefix_mismatch_behavior "drop_block"): a
	// summary or cut applies and kept messages forward thinking blocks.
	// Every later request with the same summary asks it too.
	DropMismatched bool

	// view is what Compaction and SummaryTokens need of this request,
	// so they neither re-parse nor re-tokenise; nil when not Understood.
	// It is read-only once RewriteWith returns.
	view *view
}

// analysis is what Rewrite knows about each message of a request, index
// by index. It is the seam for the steps that look at the whole history:
// the compaction step (applying a stored summary, deciding to compact)
// takes the parsed request (each message's byte span) and this analysis
// (its hash, tokens as sent and as forwarded) to compute chain hashes
// h_i = sha256(h_{i-1} || canonical(message_i)) with appendCanonical, and
// to find how many recent messages fit a token budget.
type analysis struct {
	facts   []*facts
	hashes  []contentHash // of each message's bytes as sent
	results []resultRef   // every tool result item, in body order
	// A short request's facts and hashes live here: one allocation for
	// the analysis, not three.
	smallFacts  [smallAnalysis]*facts
	smallHashes [smallAnalysis]contentHash
}

// smallAnalysis is how many messages an analysis holds without
// allocating their facts and hashes apart (a system prompt, a question
// and a few turns).
const smallAnalysis = 4

// resultRef is one tool result item of a request and the call it answers:
// dedup finds, keys and replaces results one by one, as a message may
// carry several (Anthropic's user message of tool_result blocks).
type resultRef struct {
	msg       int // its message
	ord       int // its place among that message's results: facts.results[ord]
	item      int // its index in the conversation's items
	key       callKey
	keyed     bool // whether key is known (the call was found)
	shellRead bool // its call is a shell command that only looks
	call      int  // the call's item, -1 when unknown
}

// facts is what Rewrite derives from one message: its tokens and the edits
// squash makes to it. It depends only on the encoding, the message's bytes
// and (for a tool result) the tool's name and its call's arguments, and is
// memoised on exactly that, so a turn costs only its new messages.
type facts struct {
	before, after int           // tokens of the message as sent, as squashed
	contentAfter  int           // tokens of the contents as squashed
	edits         []wire.Edit   // squash edits, offsets relative to the message start
	squashed      int           // texts squashed
	stats         []SquashStat  // one per text squashed
	calls         []call        // the calls an assistant message makes
	results       []resultFacts // one per tool result item, in order
	// originals are what the squash edits' markers point to (Item: the
	// result's place among the message's results).
	originals []Original
}

// resultFacts is what squash made of one tool result of a message: its
// content tokens as squashed, and where its edits and stats end in the
// message's (they start where the previous result's end); and what dedup
// compares of it (printedOutput).
type resultFacts struct {
	contentAfter int
	edits, stats int
	originals    int
	printed      [sha256.Size]byte
	framed       bool
}

// size approximates the bytes f holds, for the cache bound.
func (f *facts) size() int64 {
	const factsSize, editSize, callSize, statSize, resultSize = 128, 48, 64, 40, 64 // with their allocation classes
	n := int64(factsSize + cap(f.edits)*editSize + cap(f.calls)*callSize + cap(f.stats)*statSize + cap(f.results)*resultSize)
	for _, e := range f.edits {
		n += int64(cap(e.Repl))
	}
	for _, c := range f.calls {
		n += int64(len(c.id) + len(c.key.tool))
	}
	for _, s := range f.stats {
		n += int64(len(s.Shape))
	}
	for _, o := range f.originals {
		n += int64(64 + len(o.Ref) + len(o.Tool) + len(o.Text))
	}
	return n
}

// Rewrite is RewriteWith(body, Options{}): squash, dedup and counts only.
func (p *Pipeline) Rewrite(body []byte) Result {
	return p.RewriteWith(body, Options{})
}

// RewriteWith rewrites a request body of the pipeline's format
// (Config.Format): it applies the longest
// stored summary of opts.Branches that matches the request's history (see
// Options), or else trims it to opts.MaxHistoryMessages; squashes and dedups
// the tool results that remain; adds the concise-output instruction; and
// counts tokens before and after. It validates body once (Parse); every
// later step relies on that. A body that is not valid JSON or not a
// request of that format is returned unchanged with Understood false.
//
// Every byte outside the messages array is copied as sent, key order and
// whitespace included, and so is every forwarded message but for its squash
// or dedup edits and the additions (to the last leading system message, or
// at the head of the first user message). A /compact command and
// ctxpress's reply to it (CompactReplyPrefix) are left out. The output
// depends only on the body, the Config and opts, so a turn that extends an
// earlier one (with the same summary applied, and opts.PrevDedups and
// opts.PrevPrunes from it) gets the earlier turn's rewritten messages as
// its prefix, except after new dedups saving at least
// DedupConfig.MinTokens, at a prune batch (the request that opens a user
// turn) and when the history limit trims another block.
//
// body is not modified and may be returned as Result.Body; the Result
// reads body (Compaction), so body must not change while it is in use.
func (p *Pipeline) RewriteWith(body []byte, opts Options) Result {
	return p.RewriteParsed(p.Parse(p.cfg.Format, body), opts)
}

// RewriteParsed is RewriteWith on a body already parsed: the proxy parses
// each request once for Identify and every rewrite of it.
func (p *Pipeline) RewriteParsed(parsed *Parsed, opts Options) Result {
	body := parsed.body
	res := Result{Body: body, BytesBefore: len(body), BytesAfter: len(body), Applied: -1}
	if !parsed.chat {
		return res
	}
	v := &view{own: p.counter.request(parsed.conv, parsed.format)}
	req := &v.own
	res.Understood, res.Model, res.Stream, res.Messages = true, req.Model, req.Stream, len(req.Messages)
	res.ServerHistory, res.ProviderCompacts = req.ServerHistory, req.ProviderCompacts
	switch {
	case res.ServerHistory:
		// The provider holds the rest of this history: a summary, a cut,
		// or an instruction or command sent again on every turn would
		// rewrite (or pile up in) what ctxpress cannot see.
		// Nor is anything pruned (planPrune).
		opts = Options{PrevDedups: opts.PrevDedups}
	case res.ProviderCompacts:
		// The client's own compaction: nothing new is cut, but what the
		// earlier requests sent is sent alike (a summary applied, the
		// history cap, dedups and prunes): the provider compacts what it
		// has cached, and signed thinking is bound to it.
		opts.FitTokens, opts.ForceCommand = 0, false
	}
	enc := EncodingForModel(req.Model)
	prior, shared := parsed.priorAnalysis(enc)
	a := p.analyse(enc, req, prior, shared)
	if parsed.memo != nil && a != prior {
		parsed.memo.analysis.Store(&keptAnalysis{enc: enc, a: a})
	}
	p.newView(enc, v, a, opts)
	v.selectHistory(opts.Branches, opts.MaxHistoryMessages)
	res.Lead, res.CompactCommand = v.lead, v.command
	if len(opts.Branches) > 0 {
		res.Applied, res.SummaryMiss = v.applied, v.applied < 0
	}
	if v.branch != nil {
		res.Covered = v.branch.Covered
	} else if v.dropTo > v.lead {
		res.Trimmed = v.dropTo - v.lead
		if v.resend >= 0 {
			res.Trimmed--
		}
	}
	prev, prevPrunes := p.prevDedups(req, a, opts.PrevDedups), p.prevPrunes(req, a, opts.PrevPrunes)
	plan := p.planDedup(enc, req, a, v.lead, v.dropTo, prev, opts.Economics)
	v.prune = p.planPrune(v, &plan, prev, prevPrunes, opts.Economics)
	v.forwarded(plan)
	if opts.FitTokens > 0 && v.fit(opts.FitTokens) {
		res.FitDropped = v.dropTo - v.lead
		if v.branch != nil {
			res.FitDropped -= v.branch.Covered
		}
		plan = p.planDedup(enc, req, a, v.lead, v.dropTo, prev, opts.Economics)
		v.prune = p.planPrune(v, &plan, prev, prevPrunes, opts.Economics)
		v.forwarded(plan)
	}
	v.render(plan, &res)
	res.Dedups = p.dedupMarks(req, a, plan)
	v.prune.account(&res, a)
	res.Prunes = p.pruneMarks(req, a, v.prune, prevPrunes, prev)
	res.view = v
	return res
}

// analyse walks the messages in order, resolving each tool result's tool
// name and dedup key from the assistant calls before it, and derives (or
// recalls) each message's facts. The first shared messages are prior's (an
// analysis with the same encoding of a request whose messages up to there
// are these): their hashes and facts are taken from it, and when they are
// all of req's messages, prior is the analysis.
func (p *Pipeline) analyse(enc Encoding, req *request, prior *analysis, shared int) *analysis {
	n := len(req.Messages)
	if prior == nil {
		shared = 0
	} else if shared == n && len(prior.facts) == n {
		return prior
	}
	shared = min(shared, n)
	// The maps of calls by id are made at their size: a long history has
	// hundreds of calls, and growing a map is an allocation per doubling.
	nres, ncalls := 0, 0
	for i := range req.Items {
		switch req.Items[i].Kind {
		case wire.KindToolResult:
			nres++
		case wire.KindToolCall:
			ncalls++
		}
	}
	a := &analysis{results: make([]resultRef, 0, nres)}
	if n <= smallAnalysis {
		a.facts, a.hashes = a.smallFacts[:n], a.smallHashes[:n]
	} else {
		a.facts, a.hashes = make([]*facts, n), make([]contentHash, n)
	}
	// The calls by id point into their messages' facts, which are
	// immutable (cached): a pointer, not a copy of each call, per entry.
	calls := make(map[string]*call, ncalls)
	var legacy *call
	sites := newCallSites(ncalls)
	var prs []producer // the calls message i's results answer, in order
	for i := range req.Messages {
		if i < shared {
			a.hashes[i] = prior.hashes[i]
		} else {
			a.hashes[i] = hashContent(req.Bytes(i))
		}
		prs = prs[:0]
		r := req.Messages[i].Items
		for it := r.Start; it < r.End; it++ {
			item := &req.Items[it]
			if item.Kind != wire.KindToolResult {
				continue
			}
			tool, c, keyed := resultKey(item, calls, legacy)
			if item.ByName {
				legacy = nil
			}
			pr := sites.producer(req, it, tool, c.key, keyed)
			a.results = append(a.results, resultRef{msg: i, ord: len(prs), item: it, key: c.key, keyed: keyed, shellRead: c.shellRead, call: pr.call})
			prs = append(prs, pr)
		}
		var f *facts
		if i < shared {
			f = prior.facts[i]
		} else {
			f = p.messageFacts(enc, prs, req, i, a.hashes[i])
		}
		a.facts[i] = f
		sites.record(req, i)
		for j := range f.calls {
			c := &f.calls[j]
			if c.id == "" {
				legacy = c
			} else {
				calls[c.id] = c
			}
		}
	}
	return a
}

// factsKey is the memo key of a message's facts: the format, the
// encoding, the message's bytes (h) and the call each of its tool results
// answers (prs: tool name and arguments).
func factsKey(format string, enc Encoding, prs []producer, h contentHash) cacheKey {
	if len(prs) <= 1 {
		var pr producer
		if len(prs) == 1 {
			pr = prs[0]
		}
		return newKey(kindMessage, format, string(enc), pr.tool, string(pr.args[:]), string(h[:]))
	}
	parts := make([]string, 0, 3+2*len(prs))
	parts = append(parts, format, string(enc))
	for _, pr := range prs {
		parts = append(parts, pr.tool, string(pr.args[:]))
	}
	return newKey(kindMessage, append(parts, string(h[:]))...)
}

// messageFacts returns the facts of message i (whose bytes hash to h),
// from the memo when this message was seen before with the same format,
// encoding and, for its tool results, the same calls (prs, one per
// result in order).
func (p *Pipeline) messageFacts(enc Encoding, prs []producer, req *request, i int, h contentHash) *facts {
	key := factsKey(req.f.Name(), enc, prs, h)
	if v, ok := p.cache.get(key); ok {
		return v.(*facts)
	}
	f := &facts{}
	m := &req.Messages[i]
	switch {
	case !m.Object:
		f.before = p.counter.messageTokens(req, i)
		f.after, f.contentAfter = f.before, f.before
	default:
		overhead := req.f.Overhead(req.Conversation, i, req.count)
		var before, after int
		for it := m.Items.Start; it < m.Items.End; it++ {
			if req.Items[it].Kind != wire.KindToolResult {
				t := contentTokens(req, it)
				before, after = before+t, after+t
				continue
			}
			edits, b, a, stats, kept := p.squashContent(req, prs[len(f.results)], it, len(f.results))
			if f.edits == nil && f.stats == nil {
				f.edits, f.stats = edits, stats // the one result's: no copy
			} else {
				f.edits, f.stats = append(f.edits, edits...), append(f.stats, stats...)
			}
			f.originals = append(f.originals, kept...)
			rf := resultFacts{contentAfter: a, edits: len(f.edits), stats: len(f.stats), originals: len(f.originals)}
			rf.printed, rf.framed = printedOutput(req, it)
			f.results = append(f.results, rf)
			before, after = before+b, after+a
		}
		f.squashed = len(f.stats)
		f.before, f.after, f.contentAfter = overhead+before, overhead+after, after
		f.calls = callsOf(p.shell, req, i)
	}
	p.cache.add(key, f, f.size())
	return f
}
