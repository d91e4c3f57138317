package proxy

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/ctxpress/ctxpress/admin"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// lineLearnt is what a line has learnt from its turns' usage: its
// calibration and cache evidence.
type lineLearnt struct {
	lastInput, lastEstimate int
	calibration, slope      float64
	turns                   int
	cacheSeen               bool
	uncached                int
}

func learntOf(l state.Line) lineLearnt {
	return lineLearnt{l.Calibration.LastInput, l.Calibration.LastEstimate, l.Calibration.Ratio, l.Calibration.Slope, l.Turns, l.Cache.Seen, l.Cache.Uncached}
}

// askServerCompaction makes the agent's next requests ask Anthropic to
// compact their context itself, as an SDK agent with server compaction
// on does.
func askServerCompaction(a *messagesAgent) {
	for i := range a.top {
		if a.top[i].key == "context_management" {
			a.top[i].raw = `{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":50000}}]}`
		}
	}
}

// A request the upstream compacted itself (usage.iterations) is billed
// for the compaction and for the message, and recorded and shown with the
// compaction as its own figure; the message's input, the context after
// the upstream's compaction, is not the request ctxpress forwarded: the
// line's calibration and cache evidence stay as its earlier turns left
// them.
func TestServerCompactionIsBilledAndCalibratesNothing(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			up.serverCompaction.input, up.serverCompaction.output, up.serverCompaction.after = 15013, 812, 108
			deps, st := responsesDeps(t)
			p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
			session := "server-compaction-" + strconv.FormatBool(stream)
			a := newMessagesAgent(t, p.URL, session)
			for range 3 {
				a.turn(stream)
			}
			before := messagesRecord(t, p, st, session, 3)
			if learntOf(before.CurrentLine()).calibration == 0 {
				t.Fatal("the first turns calibrated nothing: the test shows nothing")
			}

			askServerCompaction(a)
			answer := a.turn(stream)
			if answer.input != 108 {
				t.Fatalf("the client read input %d, want the message's 108", answer.input)
			}
			rec := messagesRecord(t, p, st, session, 4)
			turns, _ := up.turns()
			out := turns[3].output

			last := rec.Turns[3]
			if last.InputTokens != 108 || last.ServerCompactionInput != 15013 || last.ServerCompactionOutput != 812 {
				t.Errorf("turn recorded input %d, server compaction %d in, %d out; want 108, 15013, 812",
					last.InputTokens, last.ServerCompactionInput, last.ServerCompactionOutput)
			}
			if want := (state.Usage{Calls: 1, Input: 15013, Output: 812}); rec.ServerCompaction != want {
				t.Errorf("record's server compaction %+v, want %+v", rec.ServerCompaction, want)
			}
			billed := rec.Usage
			billed.Input -= before.Usage.Input
			billed.Output -= before.Usage.Output
			billed.Calls -= before.Usage.Calls
			if billed.Calls != 1 || billed.Input != 15013+108 || billed.Output != int64(812+out) {
				t.Errorf("the turn billed %d calls, %d input, %d output; want 1, %d, %d", billed.Calls, billed.Input, billed.Output, 15013+108, 812+out)
			}
			if got, want := learntOf(rec.CurrentLine()), learntOf(before.CurrentLine()); got != want {
				t.Errorf("the line learnt from the compacted turn:\n%+v\nwas\n%+v", got, want)
			}

			var show struct {
				Data []admin.ConversationDetail `json:"data"`
			}
			getJSON(t, p.URL+"/ctxpress/conversations/"+url.PathEscape(session), &show)
			if len(show.Data) != 1 || len(show.Data[0].Turns) != 4 {
				t.Fatalf("admin view: %+v", show.Data)
			}
			d := show.Data[0]
			if sc := d.ServerCompactionUsage; sc.Calls != 1 || sc.InputTokens != 15013 || sc.OutputTokens != 812 {
				t.Errorf("admin view's server compaction usage %+v", sc)
			}
			if ti := d.Turns[3]; ti.InputTokens != 108 || ti.ServerCompactionInputTokens != 15013 || ti.ServerCompactionOutputTokens != 812 {
				t.Errorf("admin view's turn %+v", ti)
			}
			if d.Usage.InputTokens != rec.Usage.Input || d.Calibration != before.CurrentLine().Calibration.Ratio {
				t.Errorf("admin view: input %d (record %d), calibration %v (before the turn %v)",
					d.Usage.InputTokens, rec.Usage.Input, d.Calibration, before.CurrentLine().Calibration)
			}
			pricing := PricingOf(Config{Upstream: up.BaseURL()})
			compaction := pricing.Agent.PricesFor(rec.Model).Cost(rewrite.Usage{Input: 15013, Output: 812})
			withoutIt := pricing.Bill(withoutServerCompaction(rec))
			if !near(d.Cost-withoutIt.Cost, compaction) || compaction == 0 {
				t.Errorf("cost %v, %v without the server compaction; want it to add %v", d.Cost, withoutIt.Cost, compaction)
			}
		})
	}
}

// withoutServerCompaction is r as if its upstream had not compacted: its
// server compaction taken out of its usage and direct estimate.
func withoutServerCompaction(r state.Record) state.Record {
	sc := r.ServerCompaction
	for _, u := range []*state.Usage{&r.Usage, &r.Direct} {
		u.Input, u.Cached, u.CacheWrite, u.Output = u.Input-sc.Input, u.Cached-sc.Cached, u.CacheWrite-sc.CacheWrite, u.Output-sc.Output
	}
	r.ServerCompaction = state.Usage{}
	return r
}
