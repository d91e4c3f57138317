package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/wire"
)

// Original is an original that a marker of a forwarded body points to,
// for the caller to keep (Config.Expand). Its Text is empty when it is a
// tool result's content, or one of its text parts, as the client sent it:
// Parsed.OriginalText reads it then, only for the originals not kept yet.
type Original struct {
	expand.Original
	// Item is the tool result item the original was in; Part its text
	// part (its place among the content's parts), -1 for the whole
	// content (as wire.Format.Text reads it).
	Item, Part int
}

// OriginalText is o's text: its own, or read from the request p holds.
func (p *Parsed) OriginalText(o Original) string {
	if o.Text != "" || p.conv == nil || o.Item < 0 || o.Item >= len(p.conv.Items) {
		return o.Text
	}
	if o.Part < 0 {
		return p.format.Text(p.conv, o.Item)
	}
	parts := p.format.Parts(p.conv, o.Item, nil)
	if o.Part >= len(parts) {
		return ""
	}
	return parts[o.Part].Text
}

// DedupPlaceholderBack is DedupPlaceholder when ctxpress keeps originals:
// the superseded result's way back follows.
const DedupPlaceholderBack = "[duplicate result: superseded by a later call with the same arguments; see the later result; %s]"

// dedupStub is the replacement of a superseded result k (an a.results
// index) when originals are kept: DedupPlaceholderBack with its way back,
// its tokens and the original it points to; memoised on the message's
// bytes and the result's place, so an unchanged history is not hashed
// again.
type dedupStub struct {
	text   string
	tokens int
	origin expand.Original
}

func (p *Pipeline) dedupStub(enc Encoding, req *request, a *analysis, k int) dedupStub {
	r := &a.results[k]
	h := a.hashes[r.msg]
	key := newKey(kindDedup, req.f.Name(), string(enc), r.key.tool, string(h[:]), strconv.Itoa(r.ord))
	if c, ok := p.cache.get(key); ok {
		return c.(dedupStub)
	}
	text := req.f.Text(req.Conversation, r.item)
	o := expand.Original{Ref: expand.Ref(text), Kind: expand.KindDedup, Tool: r.key.tool}
	stub := fmtBack(DedupPlaceholderBack, p.cfg.Expand.Back(o.Ref, expand.AllLines(text)))
	s := dedupStub{text: stub, tokens: p.counter.Count(enc, stub), origin: o}
	p.cache.add(key, s, int64(len(stub)+len(o.Ref)+len(o.Tool)+48))
	return s
}

// fmtBack puts way into format's one %s.
func fmtBack(format, way string) string {
	for i := 0; i+1 < len(format); i++ {
		if format[i] == '%' && format[i+1] == 's' {
			return format[:i] + way + format[i+2:]
		}
	}
	return format
}

// keepOriginal notes, in res, the original of result item it as plan
// replaces it (a prune's or a dedup's), when plan knows one.
func (plan dedupPlan) keepOriginal(res *Result, it int) {
	if o, ok := plan.origins[it]; ok {
		res.Originals = append(res.Originals, Original{Original: o, Item: it, Part: -1})
	}
}

// origin notes that result item it, as plan replaces it, points to o.
func (plan *dedupPlan) origin(it int, o expand.Original) {
	if o.Ref == "" {
		return
	}
	if plan.origins == nil {
		plan.origins = map[int]expand.Original{}
	}
	plan.origins[it] = o
}

// appendOriginals appends kept, the originals of message i's squash edits
// (Item: the result's place among the message's results), with Item the
// result's item in req.
func appendOriginals(dst []Original, req *request, i int, kept []Original) []Original {
	r := req.Messages[i].Items
	for _, o := range kept {
		ord := o.Item
		for it := r.Start; it < r.End; it++ {
			if req.Items[it].Kind != wire.KindToolResult {
				continue
			}
			if ord == 0 {
				o.Item = it
				dst = append(dst, o)
				break
			}
			ord--
		}
	}
	return dst
}

// countOriginals is how many originals the squash edits of facts name.
func countOriginals(facts []*facts) int {
	n := 0
	for _, f := range facts {
		n += len(f.originals)
	}
	return n
}

// squashOriginals are the originals the squash of one text part points to,
// as the memo keeps them: the part's own text is not kept (Text ""), a text
// found inside it is.
func squashOriginals(kept []expand.Original, text string) []expand.Original {
	if len(kept) == 0 {
		return nil
	}
	out := make([]expand.Original, len(kept))
	for i, o := range kept {
		if o.Text == text {
			o.Text = ""
		} else {
			o.Text = strings.Clone(o.Text)
		}
		out[i] = o
	}
	return out
}

// partOriginals places the originals of a squashed text part (its place
// among the result's parts) on result ord of a message.
func partOriginals(dst []Original, kept []expand.Original, ord, part int) []Original {
	for _, o := range kept {
		dst = append(dst, Original{Original: o, Item: ord, Part: part})
	}
	return dst
}

// FileRetrievals are the references whose files (under dir, expand.Ways.
// Dir) the calls of the latest assistant message read, when the request
// answers them (its last message carries their results): each call is
// counted on the one request that first carries its result. A retrieval
// means a marker hid something the agent needed.
func (p *Parsed) FileRetrievals(dir string) []string {
	c := p.conv
	if dir == "" || c == nil || len(c.Messages) < 2 {
		return nil
	}
	last := len(c.Messages) - 1
	if !hasResult(c, last) {
		return nil
	}
	asked := last - 1
	for asked >= 0 && c.Messages[asked].Role != wire.RoleAssistant {
		asked--
	}
	if asked < 0 {
		return nil
	}
	var refs []string
	prefix := strings.TrimRight(dir, "/") + "/"
	r := c.Messages[asked].Items
	for it := r.Start; it < r.End; it++ {
		if c.Items[it].Kind != wire.KindToolCall {
			continue
		}
		args := p.format.Arguments(c, it)
		for {
			i := strings.Index(args, prefix)
			if i < 0 {
				break
			}
			args = args[i+len(prefix):]
			if len(args) >= expand.RefLen && expand.ValidRef(args[:expand.RefLen]) && !slices.Contains(refs, args[:expand.RefLen]) {
				refs = append(refs, args[:expand.RefLen])
			}
		}
	}
	return refs
}

// hasResult reports whether message m carries a tool result.
func hasResult(c *wire.Conversation, m int) bool {
	r := c.Messages[m].Items
	for it := r.Start; it < r.End; it++ {
		if c.Items[it].Kind == wire.KindToolResult {
			return true
		}
	}
	return false
}
