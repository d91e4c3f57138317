package state

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// The on-disk form is a compatibility promise: existing databases hold it.
// Changing this golden string means old data reads differently; add fields,
// never rename them, and bump SchemaVersion for incompatible changes.
const goldenV1 = `{"ns":"ns","id":"c1","model":"gpt-4o","last_input_tokens":1234,"last_estimate":1200,` +
	`"calibration":1.5,"requests":2,"tokens_before":300,"tokens_after":200,"tokens_saved":100,"compactions":1,` +
	`"branches":[{"summary":"S","covered":4,"hash":"6100000000000000000000000000000000000000000000000000000000000000",` +
	`"created_at":"2025-01-02T03:04:05Z","used_at":"2025-01-02T03:04:05Z"}],` +
	`"breaker":{"consecutive_over_trigger":2,"reason":"r"},` +
	`"recent_summaries":[{"at":"2025-01-02T03:04:05Z","summary":"S","covered_messages":4,"tokens_before":250,"tokens_after":100}],` +
	`"turns":[[1735787045000,100,100,90,0],[1735787046000,200,100,95,1]],` +
	`"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06Z"}`

// goldenWritten is what this version writes: goldenV1's numbers and breaker
// as a line, and the turns last (they are spliced in after the rest). Both
// must decode to the same record.
const goldenWritten = `{"ns":"ns","id":"c1","model":"gpt-4o","requests":2,"tokens_before":300,"tokens_after":200,"tokens_saved":100,"compactions":1,` +
	`"branches":[{"summary":"S","covered":4,"hash":"6100000000000000000000000000000000000000000000000000000000000000",` +
	`"created_at":"2025-01-02T03:04:05Z","used_at":"2025-01-02T03:04:05Z"}],` +
	`"lines":[{"model":"gpt-4o","last_input_tokens":1234,"last_estimate":1200,"calibration":1.5,` +
	`"breaker":{"consecutive_over_trigger":2,"reason":"r"},"used_at":"2025-01-02T03:04:06Z"}],` +
	`"recent_summaries":[{"at":"2025-01-02T03:04:05Z","summary":"S","covered_messages":4,"tokens_before":250,"tokens_after":100}],` +
	`"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06Z",` +
	`"turns":[[1735787045000,100,100,90,0],[1735787046000,200,100,95,1]]}`

func goldenRecord() Record {
	return Record{
		Key: Key{Namespace: "ns", ID: "c1"}, Model: "gpt-4o",
		Requests: 2, TokensBefore: 300, TokensAfter: 200, TokensSaved: 100, Compactions: 1,
		Branches: []Branch{{Branch: history.Branch{Summary: "S", Covered: 4, Hash: hashOf("a")}, CreatedAt: t0, UsedAt: t0}},
		// A schema-1 record's numbers and breaker become a line that every
		// request extends (no ID, no tip, 0 messages).
		Lines: []Line{{Numbers: history.Numbers{Model: "gpt-4o", Calibration: history.Calibration{LastInput: 1234, LastEstimate: 1200, Ratio: 1.5},
			Breaker: history.Breaker{ConsecutiveOverTrigger: 2, Reason: "r"}}, UsedAt: t0.Add(time.Second)}},
		RecentSummaries: []SummaryEntry{
			{At: t0, Summary: "S", CoveredMessages: 4, TokensBefore: 250, TokensAfter: 100},
		},
		Turns: []Turn{
			{At: t0, TokensBefore: 100, TokensAfter: 100, InputTokens: 90},
			{At: t0.Add(time.Second), TokensBefore: 200, TokensAfter: 100, InputTokens: 95, Compacted: true},
		},
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
	}
}

func TestEncodingGolden(t *testing.T) {
	r := goldenRecord()
	data, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != goldenWritten {
		t.Errorf("encoding changed:\n got %s\nwant %s", data, goldenWritten)
	}
	for _, golden := range []string{goldenV1, goldenWritten} {
		got, err := decodeRecord(r.Key, []byte(golden))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("decode(%s) =\n%+v, %v\nwant\n%+v", golden, got, err, r)
		}
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Errorf("not JSON: %v", err)
	}
}

// goldenUsage is a record with the upstream's usage summed (the
// conversation's requests, its summary calls, the direct estimate) and a
// line that remembers its last request's size.
const goldenUsage = `{"ns":"ns","id":"c1","model":"claude-sonnet-4-5","requests":3,` +
	`"usage":{"calls":2,"unreported":1,"input":30000,"cached":25000,"cache_write":4000,"output":300},` +
	`"summary_usage":{"calls":1,"input":9000,"output":800},` +
	`"direct_usage":{"input":41000,"cached":20000,"cache_write":21000,"output":300},` +
	`"server_compaction_usage":{"calls":1,"input":15013,"output":812},` +
	`"lines":[{"last_sent":21000}]}`

// Usage counters are stored as they are summed, and a record written
// before there were any (goldenV1, goldenWritten) reads with none.
func TestUsageCountersOnDisk(t *testing.T) {
	r := Record{Key: Key{Namespace: "ns", ID: "c1"}, Model: "claude-sonnet-4-5", Requests: 3,
		Usage:            Usage{Calls: 2, Unreported: 1, Input: 30000, Cached: 25000, CacheWrite: 4000, Output: 300},
		Summary:          Usage{Calls: 1, Input: 9000, Output: 800},
		Direct:           Usage{Input: 41000, Cached: 20000, CacheWrite: 21000, Output: 300},
		ServerCompaction: Usage{Calls: 1, Input: 15013, Output: 812},
		Lines:            []Line{{LastSent: 21000}}}
	data, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != goldenUsage {
		t.Errorf("encoding:\n got %s\nwant %s", data, goldenUsage)
	}
	if got, err := decodeRecord(r.Key, []byte(goldenUsage)); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("decode = %+v, %v; want %+v", got, err, r)
	}
	for _, old := range []string{goldenV1, goldenWritten} {
		got, err := decodeRecord(r.Key, []byte(old))
		if err != nil || got.Usage != (Usage{}) || got.Summary != (Usage{}) || got.Direct != (Usage{}) || got.ServerCompaction != (Usage{}) ||
			got.Lines[0].LastSent != 0 {
			t.Errorf("a record written before usage was summed: %+v %+v %+v %+v, %v", got.Usage, got.Summary, got.Direct, got.ServerCompaction, err)
		}
	}
}

func TestUsagePlus(t *testing.T) {
	a := Usage{Calls: 1, Unreported: 2, Input: 3, Cached: 4, CacheWrite: 5, Output: 6}
	if got := a.Plus(a); got != (Usage{Calls: 2, Unreported: 4, Input: 6, Cached: 8, CacheWrite: 10, Output: 12}) {
		t.Errorf("Plus = %+v", got)
	}
}

func TestEncodingZeroRecord(t *testing.T) {
	r := Record{Key: Key{Namespace: "ns", ID: "c"}}
	data, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"ns":"ns","id":"c"}` {
		t.Errorf("zero record = %s", data)
	}
}

func TestDecodeUsesStorageKey(t *testing.T) {
	k := Key{Namespace: "real", ID: "id"}
	r, err := decodeRecord(k, []byte(`{"ns":"forged","id":"other"}`))
	if err != nil || r.Key != k {
		t.Errorf("decodeRecord key = %v, %v; want %v", r.Key, err, k)
	}
}

// TestNormalizeMatchesRoundTrip keeps normalize, which lets Update skip a
// decode, equal to what a decode of the stored bytes gives.
func TestNormalizeMatchesRoundTrip(t *testing.T) {
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	now := time.Now() // has a monotonic reading and nanoseconds
	cases := map[string]Record{
		"golden": goldenRecord(),
		"zero":   {},
		"empty slices": {
			Branches: []Branch{}, Lines: []Line{}, RecentSummaries: []SummaryEntry{}, Turns: []Turn{},
		},
		"zones and nanoseconds": {
			CreatedAt: now, UpdatedAt: now.In(zone),
			Branches:        []Branch{{CreatedAt: now.In(zone), UsedAt: now}},
			Lines:           []Line{{Numbers: history.Numbers{Breaker: history.Breaker{BackoffUntil: now.In(zone)}}, UsedAt: now.In(zone)}},
			RecentSummaries: []SummaryEntry{{At: now}},
			Turns:           []Turn{{At: now.In(zone)}, {At: time.Time{}}, {At: time.Unix(-5, 999).In(zone)}},
		},
		"NaN":  {Lines: []Line{{Numbers: history.Numbers{Calibration: history.Calibration{Ratio: math.NaN()}}}}},
		"+Inf": {Lines: []Line{{Numbers: history.Numbers{Calibration: history.Calibration{Ratio: math.Inf(1)}}}}},
		"big": {
			Requests: math.MaxInt64, Lines: []Line{{Numbers: history.Numbers{Calibration: history.Calibration{LastInput: math.MaxInt32}}, Messages: math.MaxInt32}},
			Turns: []Turn{{TokensBefore: math.MaxInt32, TokensAfter: -1, InputTokens: math.MinInt32}},
		},
		"edits": {Turns: []Turn{{Edits: []history.Edit{}}, {Edits: []history.Edit{{Kind: history.EditPruned, Index: 3, Count: 1,
			Name: strings.Repeat("é", MaxEditName), Before: 900, After: 20}}}, {InputTokens: 4, Edits: []history.Edit{{Kind: history.EditCut, Count: 2}}}}},
		"title and agent": {Title: "Fix <b>it</b>\u2028", Agent: "claude-cli/2.0.14"},
		"cache counts":    {Turns: []Turn{{InputTokens: 90, CachedTokens: 80}, {InputTokens: 95, CacheWriteTokens: 5}, {InputTokens: 1}}},
		"server compaction": {ServerCompaction: Usage{Calls: 1, Input: 15013, Output: 812},
			Turns: []Turn{{InputTokens: 108, ServerCompactionInput: 15013, ServerCompactionOutput: 812}, {InputTokens: 9, ServerCompactionOutput: 1}}},
		"usage": {Usage: Usage{Calls: 1, Input: 90, Cached: 80}, Summary: Usage{Unreported: 1}, Direct: Usage{Output: math.MaxInt64},
			Lines: []Line{{LastSent: 7}}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			r.Key = Key{Namespace: "ns", ID: "id"}
			data, err := encodeRecord(&r)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeRecord(r.Key, data)
			if err != nil {
				t.Fatal(err)
			}
			normalize(&r)
			if !reflect.DeepEqual(r, want) {
				t.Errorf("normalize =\n%#v\nround trip =\n%#v", r, want)
			}
		})
	}
}

func TestDiskTurnsUnmarshal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Turn
		bad  bool
	}{
		{in: `[]`, want: nil},
		{in: `null`, want: nil},
		{in: ` [ [ 0 , 1 , 2 , 3 , 0 ] ] `, want: []Turn{{TokensBefore: 1, TokensAfter: 2, InputTokens: 3}}},
		{in: `[[1735787045000,1,2,3,1,77,88]]`, want: []Turn{{At: t0, TokensBefore: 1, TokensAfter: 2, InputTokens: 3, Compacted: true, CachedTokens: 77, CacheWriteTokens: 88}}},
		{in: `[[1735787045000,1,2,3,1,77,88,99,100]]`, want: []Turn{{At: t0, TokensBefore: 1, TokensAfter: 2, InputTokens: 3, Compacted: true,
			CachedTokens: 77, CacheWriteTokens: 88, ServerCompactionInput: 99, ServerCompactionOutput: 100}}},
		{in: `[[1735787045000,1,2,3,1,77,88,99,100,101]]`, want: []Turn{{At: t0, TokensBefore: 1, TokensAfter: 2, InputTokens: 3, Compacted: true,
			CachedTokens: 77, CacheWriteTokens: 88, ServerCompactionInput: 99, ServerCompactionOutput: 100}}},
		{in: `[[1,2,3,4,0,5]]`, want: []Turn{{At: time.UnixMilli(1).UTC(), TokensBefore: 2, TokensAfter: 3, InputTokens: 4, CachedTokens: 5}}},
		{in: `[[-1000,0,0,0,0]]`, want: []Turn{{At: time.Unix(-1, 0).UTC()}}},
		{in: `[[1,2,3,4]]`, bad: true},
		{in: `[[1,2,3,4,"x"]]`, bad: true},
		{in: `[[1.5,2,3,4,5]]`, bad: true},
		{in: `[{"at":1}]`, bad: true},
		{in: `{"a":1}`, bad: true},
		{in: `[[99999999999999999999,0,0,0,0]]`, bad: true},
	} {
		var got struct {
			Turns diskTurns `json:"turns"`
		}
		err := json.Unmarshal([]byte(`{"turns":`+c.in+`}`), &got)
		if c.bad {
			if err == nil {
				t.Errorf("%s: decoded %+v, want an error", c.in, got.Turns)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual([]Turn(got.Turns), c.want) {
			t.Errorf("%s = %+v, %v; want %+v", c.in, got.Turns, err, c.want)
		}
	}
}

// A turn's edits on disk: after its nine numbers (written, 0 or not, so
// that the edits keep their place), how many edits, how many names, each
// name as its length and bytes, then each edit as kind, index, count,
// before, after and its name's place (0: none). An earlier version reads
// the nine and ignores the rest, as it always did a later version's
// numbers (the row of ten in TestDiskTurnsUnmarshal); this one ignores
// numbers after the edits alike.
func TestTurnEditsOnDisk(t *testing.T) {
	turn := Turn{At: t0, TokensBefore: 48210, TokensAfter: 6102, Compacted: true, Edits: []history.Edit{
		{Kind: history.EditSummarised, Index: 1, Count: 30, Before: 40000, After: 900},
		{Kind: history.EditSquashed, Index: 33, Count: 1, Name: "bash", Before: 4210, After: 380},
		{Kind: history.EditSquashed, Index: 35, Count: 1, Name: "bash", Before: 3900, After: 350},
	}}
	const disk = `[[1735787045000,48210,6102,0,1,0,0,0,0,3,1,4,98,97,115,104,4,1,30,40000,900,0,1,33,1,4210,380,1,1,35,1,3900,350,1]]`
	out, err := json.Marshal(diskTurns{turn})
	if err != nil || string(out) != disk {
		t.Fatalf("%s, %v; want %s", out, err, disk)
	}
	const head = `[[1735787045000,48210,6102,0,1,0,0,0,0,3,1,4,98,97,115,104,`
	for _, tc := range []struct {
		name, in string
		want     []history.Edit
	}{
		{"as written", disk, turn.Edits},
		{"a later version's numbers after the edits", strings.TrimSuffix(disk, "]]") + `,7,7,7]]`, turn.Edits},
		{"an edit cut short: those before it", head + `4,1,30,40000,900,0,1,33,1,4210,380,1,1,35]]`, turn.Edits[:2]},
		{"a name that is not there: those before it", head + `4,1,30,40000,900,0,1,33,1,4210,380,2]]`, turn.Edits[:1]},
		{"a name byte out of range: none", `[[1735787045000,48210,6102,0,1,0,0,0,0,1,1,1,256,4,1,30,40000,900,0]]`, nil},
		{"a name longer than any written: none", `[[1735787045000,48210,6102,0,1,0,0,0,0,1,1,99,4,1,30,40000,900,0]]`, nil},
		{"none", `[[1735787045000,48210,6102,0,1,0,0,0,0,0]]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got diskTurns
			if err := json.Unmarshal([]byte(tc.in), &got); err != nil || len(got) != 1 {
				t.Fatalf("%v: %+v", err, got)
			}
			want := turn
			want.Edits = tc.want
			if !reflect.DeepEqual(got[0], want) {
				t.Fatalf("read %+v\nwant %+v", got[0], want)
			}
		})
	}
	// A long name is cut on a rune boundary, and reads back as cut.
	long := Turn{Edits: []history.Edit{{Kind: history.EditDeduped, Count: 1, Name: strings.Repeat("名", 20)}}}
	out, _ = json.Marshal(diskTurns{long})
	var back diskTurns
	if err := json.Unmarshal(out, &back); err != nil || back[0].Edits[0].Name != strings.Repeat("名", MaxEditName/3) {
		t.Fatalf("a long name: %s read back as %+v, %v", out, back, err)
	}
}

// A record's title and agent: stored when set, absent from one written
// before them (goldenWritten), which reads with neither.
func TestTitleAndAgentOnDisk(t *testing.T) {
	r := Record{Key: Key{Namespace: "ns", ID: "c"}, Title: "Fix the leap-year bug", Agent: "opencode/0.15.2"}
	data, err := encodeRecord(&r)
	if want := `{"ns":"ns","id":"c","title":"Fix the leap-year bug","agent":"opencode/0.15.2"}`; err != nil || string(data) != want {
		t.Fatalf("%s, %v; want %s", data, err, want)
	}
	if got, err := decodeRecord(r.Key, data); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if got, err := decodeRecord(r.Key, []byte(goldenWritten)); err != nil || got.Title != "" || got.Agent != "" {
		t.Fatalf("an older record: %q %q, %v", got.Title, got.Agent, err)
	}
}

// A turn the server compacted is written with its cache counts, 0 or
// not, so that its own two numbers keep their places.
func TestServerCompactionTurnOnDisk(t *testing.T) {
	out, err := json.Marshal(diskTurns{{At: t0, InputTokens: 108, ServerCompactionInput: 15013, ServerCompactionOutput: 812}, {InputTokens: 5}})
	if want := `[[1735787045000,0,0,108,0,0,0,15013,812],[0,0,0,5,0]]`; err != nil || string(out) != want {
		t.Errorf("%s, %v; want %s", out, err, want)
	}
}

func FuzzDiskTurns(f *testing.F) {
	for _, s := range []string{`[]`, `[[1,2,3,4,5]]`, `[[0,0,0,0,0],[1735787045000,1,2,3,1]]`, `[[`, `[[1,2,3,4,5,6]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var ts diskTurns
		if err := json.Unmarshal([]byte(in), &ts); err != nil {
			return
		}
		out, err := json.Marshal(ts)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%q): %v", in, err)
		}
		var again diskTurns
		if err := json.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(again, ts) {
			t.Fatalf("round trip of %q: %s -> %+v, %v", in, out, again, err)
		}
	})
}

// The dedup marks on disk, row by row: a mark of a message's first result
// is written as every version wrote it, [index, digest]; one of a later
// result carries its place as a third element; a mark written before
// results were deduped one by one reads as the message's first result.
func TestDedupMarksOnDisk(t *testing.T) {
	d := hashOf("d")
	hex := `"64` + strings.Repeat("0", 62) + `"` // hashOf("d") in hex
	tests := []struct {
		name string
		mark history.DedupMark
		disk string
	}{
		{"the first result of a message: [index, digest], as before", history.DedupMark{Index: 3, Digest: d}, `[3,` + hex + `]`},
		{"a later result of a message: [index, digest, result]", history.DedupMark{Index: 3, Result: 2, Digest: d}, `[3,` + hex + `,2]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Key: Key{Namespace: "ns", ID: "c"}, Lines: []Line{{Dedups: []history.DedupMark{tc.mark}}}}
			data, err := encodeRecord(&r)
			if err != nil {
				t.Fatal(err)
			}
			if want := `"dedups":[` + tc.disk + `]`; !strings.Contains(string(data), want) {
				t.Errorf("written %s, want it to hold %s", data, want)
			}
			got, err := decodeRecord(r.Key, data)
			if err != nil || !reflect.DeepEqual(got.Lines[0].Dedups, r.Lines[0].Dedups) {
				t.Errorf("read back %+v, %v; want %+v", got.Lines, err, r.Lines[0].Dedups)
			}
		})
	}
	reads := []struct {
		name string
		disk string
		want history.DedupMark
	}{
		{"a mark written before per-result dedup is the message's first result", `[7,` + hex + `]`, history.DedupMark{Index: 7, Digest: d}},
		{"a newer version's fourth element is not read", `[7,` + hex + `,1,"later"]`, history.DedupMark{Index: 7, Result: 1, Digest: d}},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeRecord(Key{Namespace: "ns", ID: "c"}, []byte(`{"ns":"ns","id":"c","lines":[{"dedups":[`+tc.disk+`]}]}`))
			if err != nil || len(got.Lines) != 1 || !reflect.DeepEqual(got.Lines[0].Dedups, []history.DedupMark{tc.want}) {
				t.Errorf("read %+v, %v; want %+v", got.Lines, err, tc.want)
			}
		})
	}
}

// The prune marks on disk: [index, digest, result, turn]; a record written
// before pruning (no "prunes") reads with none, and a newer version's
// fifth element is not read.
func TestPruneMarksOnDisk(t *testing.T) {
	d := hashOf("d")
	hex := `"64` + strings.Repeat("0", 62) + `"` // hashOf("d") in hex
	r := Record{Key: Key{Namespace: "ns", ID: "c"}, Lines: []Line{{Prunes: []history.PruneMark{{Index: 3, Result: 1, Digest: d, Turn: 8}}}}}
	data, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"prunes":[[3,` + hex + `,1,8]]`; !strings.Contains(string(data), want) {
		t.Errorf("written %s, want it to hold %s", data, want)
	}
	reads := []struct {
		name, disk string
		want       []history.PruneMark
	}{
		{"as written", string(data), r.Lines[0].Prunes},
		{"a record written before pruning", `{"ns":"ns","id":"c","lines":[{"dedups":[[7,` + hex + `]]}]}`, nil},
		{"a newer version's fifth element", `{"ns":"ns","id":"c","lines":[{"prunes":[[3,` + hex + `,1,8,"later"]]}]}`, r.Lines[0].Prunes},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeRecord(r.Key, []byte(tc.disk))
			if err != nil || len(got.Lines) != 1 || !reflect.DeepEqual(got.Lines[0].Prunes, tc.want) {
				t.Errorf("read %+v, %v; want %+v", got.Lines, err, tc.want)
			}
		})
	}
	if _, err := decodeRecord(r.Key, []byte(`{"ns":"ns","id":"c","lines":[{"prunes":[[3,`+hex+`]]}]}`)); err == nil {
		t.Error("a mark without its result and turn was read")
	}
}

// Where the messages a summary replaced are kept goes with its branch and
// its entry, and a record written before they were kept reads with none:
// its block is rendered as it always was.
func TestKeptOnDisk(t *testing.T) {
	kept := history.Kept{Ref: "3f9a2c1b4d5e", First: 0, Last: 41, Note: "The 42 earlier messages this summary replaces are kept in full"}
	r := Record{Key: Key{Namespace: "ns", ID: "c"},
		Branches:        []Branch{{Branch: history.Branch{Summary: "s", Covered: 42, Hash: hashOf("b"), Kept: kept}}, {Branch: history.Branch{Summary: "old", Hash: hashOf("o")}}},
		RecentSummaries: []SummaryEntry{{Summary: "s", CoveredMessages: 42, Kept: kept}}}
	data, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"kept":{"ref":"3f9a2c1b4d5e","first":0,"last":41,"note":`; strings.Count(string(data), want) != 2 {
		t.Errorf("written %s, want the branch and the entry to hold %s", data, want)
	}
	if strings.Count(string(data), `"kept"`) != 2 {
		t.Errorf("a branch with nothing kept writes kept: %s", data)
	}
	got, err := decodeRecord(r.Key, data)
	if err != nil || got.Branches[0].Kept != kept || !got.Branches[1].Kept.IsZero() || got.RecentSummaries[0].Kept != kept {
		t.Errorf("read back %+v, %+v, %v; want %+v on the first branch and the entry", got.Branches, got.RecentSummaries, err, kept)
	}
	old, err := decodeRecord(r.Key, []byte(`{"ns":"ns","id":"c","branches":[{"summary":"s","covered":3,"hash":"`+hashOf("b").String()+`"}]}`))
	if err != nil || len(old.Branches) != 1 || !old.Branches[0].Kept.IsZero() {
		t.Errorf("a branch written before: %+v, %v", old.Branches, err)
	}
}
