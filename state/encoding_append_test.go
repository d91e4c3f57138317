package state

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// checkAppendMatchesJSON fails t unless appendDiskRecord writes exactly what
// json.Marshal writes for d, or fails exactly as it fails, and without
// json.Marshal's help (appendDiskRecordFast) where it does not fail; it
// appends after a prefix to check that it appends rather than overwrites.
func checkAppendMatchesJSON(t testing.TB, what string, d *diskRecord) {
	t.Helper()
	want, wantErr := json.Marshal(d)
	got, err := appendDiskRecord([]byte("prefix"), d)
	fast, ok := appendDiskRecordFast([]byte("prefix"), d)
	switch {
	case wantErr != nil || err != nil:
		if wantErr == nil || err == nil || err.Error() != wantErr.Error() {
			t.Fatalf("%s: error %v, json.Marshal's %v", what, err, wantErr)
		}
		if ok {
			t.Fatalf("%s: appendDiskRecordFast wrote %q where json.Marshal fails: %v", what, fast, wantErr)
		}
	case !ok || string(fast) != string(got):
		t.Fatalf("%s: appendDiskRecordFast = %q, %v; want %q", what, fast, ok, got)
	case string(got) != "prefix"+string(want):
		t.Fatalf("%s:\n got %q\nwant %q", what, got, "prefix"+string(want))
	}
}

// The rules of the encoding, one row each; the record around each value
// is otherwise empty (only ns and id are always written).
func TestAppendDiskRecordEdgeCases(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	odd := time.FixedZone("", -(3*3600 + 30*60 + 17)) // seconds in the offset are not written
	h := hashOf("x")
	for _, row := range []struct {
		name string
		d    diskRecord
	}{
		{"an empty record writes ns and id only", diskRecord{}},
		{"HTML characters are escaped", diskRecord{ID: "<a href='x'>&amp;</a>"}},
		{"quote and backslash are escaped", diskRecord{ID: `say "hi" \o/`}},
		{"control characters use short escapes where JSON has them", diskRecord{ID: "\b\f\n\r\t"}},
		{"other control characters are \\u00XX, DEL is not", diskRecord{ID: "\x00\x01\x1b\x1f\x7f"}},
		{"invalid UTF-8 is one \\ufffd per byte", diskRecord{ID: "a\xffb\xc3\xed\xa0\x80c\xf0\x9f\x98"}},
		{"a real U+FFFD is written as it is", diskRecord{ID: "\ufffd"}},
		{"U+2028 and U+2029 are escaped", diskRecord{ID: "a\u2028b\u2029c"}},
		{"other non-ASCII is written as it is", diskRecord{ID: "é中😀"}},
		{"a summary is written when empty", diskRecord{Branches: []diskBranch{{}}, RecentSummaries: []diskSummary{{}}}},
		{"a prepared branch says so", diskRecord{Branches: []diskBranch{{Summary: "s", Prepared: true, ApplyAt: 12}, {Summary: "t"}}}},
		{"kept messages from message 0, without a note", diskRecord{Branches: []diskBranch{{Summary: "s", Kept: diskKept{Ref: "3f9a2c1b4d5e", Last: 9}}},
			RecentSummaries: []diskSummary{{Kept: diskKept{Ref: "3f9a2c1b4d5e", First: 1, Last: 9, Note: "<kept> & 'sed'"}}}}},
		{"an empty non-nil slice is left out", diskRecord{Branches: []diskBranch{}, Lines: []diskLine{}, RecentSummaries: []diskSummary{}, Turns: diskTurns{}}},
		{"empty lines write {}", diskRecord{Lines: []diskLine{{}, {Dedups: []diskDedup{}, Prunes: []diskPrune{}}}}},
		{"extreme ints", diskRecord{Requests: math.MaxInt64, TokensBefore: math.MinInt64, TokensAfter: -1,
			Lines: []diskLine{{Messages: math.MinInt, Turns: math.MaxInt}}}},
		{"a usage with one counter writes that counter", diskRecord{Direct: diskUsage{Output: 1}}},
		{"a negative zero float is left out", diskRecord{LegacyCalibration: math.Copysign(0, -1)}},
		{"floats below 1e21 are %f", diskRecord{Lines: []diskLine{{Calibration: math.Nextafter(1e21, 0), Slope: -123456789.125}}}},
		{"floats from 1e21 are %e", diskRecord{Lines: []diskLine{{Calibration: 1e21, Slope: -math.MaxFloat64}}}},
		{"floats from 1e-6 are %f", diskRecord{Lines: []diskLine{{Calibration: 1e-6, Slope: -0.000123}}}},
		{"floats below 1e-6 are %e with e-7, not e-07", diskRecord{Lines: []diskLine{{Calibration: math.Nextafter(1e-6, 0), Slope: 1e-7}}}},
		{"the smallest float", diskRecord{Lines: []diskLine{{Calibration: 5e-324, Slope: -1e-100}}}},
		{"NaN fails as json.Marshal fails", diskRecord{Lines: []diskLine{{Calibration: math.NaN()}}}},
		{"Inf fails as json.Marshal fails", diskRecord{LegacyCalibration: math.Inf(-1)}},
		{"a time without nanoseconds has no fraction", diskRecord{CreatedAt: t0}},
		{"a fraction's trailing zeros are dropped", diskRecord{CreatedAt: t0.Add(120 * time.Millisecond), UpdatedAt: t0.Add(time.Nanosecond)}},
		{"a time keeps its zone offset", diskRecord{CreatedAt: t0.In(cet), UpdatedAt: t0.In(odd)}},
		{"a zero time in a zone is left out, the breaker around it is not", diskRecord{LegacyBreaker: diskBreaker{BackoffUntil: time.Time{}.In(cet)}}},
		{"a monotonic reading is not written", diskRecord{UpdatedAt: time.Now()}},
		{"year 0 and 9999 are written", diskRecord{CreatedAt: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), UpdatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{"year 10000 fails as json.Marshal fails", diskRecord{Lines: []diskLine{{UsedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}},
		{"a negative year fails as json.Marshal fails", diskRecord{Branches: []diskBranch{{UsedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}}},
		{"a zone offset of a day fails as json.Marshal fails", diskRecord{CreatedAt: t0.In(time.FixedZone("", 24*3600))}},
		{"a dedup of a message's first result has two elements", diskRecord{Lines: []diskLine{{Dedups: []diskDedup{{Index: 3, Digest: h}, {Index: -1, Result: 2}}}}}},
		{"prunes have four elements", diskRecord{Lines: []diskLine{{Prunes: []diskPrune{{}, {Index: 1, Result: 2, Digest: h, Turn: math.MaxInt}}}}}},
		{"a zero hash is written where it is not omitzero", diskRecord{Branches: []diskBranch{{Hash: ChainHash{}, Parent: h}}}},
		{"a full breaker", diskRecord{LegacyBreaker: diskBreaker{ForceNext: true, Tripped: true, ConsecutiveOverTrigger: 1, FailureCount: -1, BackoffUntil: t0, Reason: "<r>"}}},
		{"turns are written where the field is", diskRecord{Turns: diskTurns{{At: t0, TokensBefore: 1, CachedTokens: 2}, {}}, UpdatedAt: t0}},
		{"every field", fullDiskRecord()},
	} {
		t.Run(row.name, func(t *testing.T) { checkAppendMatchesJSON(t, row.name, &row.d) })
	}
}

// fullDiskRecord is fullRecord as encodeRecord converts it, with the
// fields it never writes (the legacy ones, the turns) set too.
func fullDiskRecord() diskRecord {
	r := fullRecord(keyA)
	var d diskRecord
	data, err := encodeRecord(&r)
	if err == nil {
		err = json.Unmarshal(data, &d)
	}
	if err != nil {
		panic(err)
	}
	d.LegacyLastInputTokens, d.LegacyLastEstimate, d.LegacyCalibration = 1, 2, 0.5
	d.LegacyBreaker = diskBreaker{ForceNext: true, Reason: "old"}
	d.Usage, d.Summary, d.Direct = diskUsage{1, 2, 3, 4, 5, 6}, diskUsage{Calls: 1}, diskUsage{Output: 9}
	d.Turns = diskTurns(r.Turns)
	d.Branches[0].Since = 4
	l := &d.Lines[0]
	l.LastSent, l.Turns, l.CacheSeen, l.UncachedPrompts = 100, 3, true, 2
	return d
}

// Over many pseudo-random records, every field filled or not (found by
// reflection, so a field added to diskRecord is covered without editing
// the generator), appendDiskRecord writes what json.Marshal writes.
func TestAppendDiskRecordMatchesJSON(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	g := recordGen{r: rand.New(rand.NewPCG(18, 2026))}
	for i := range n {
		g.bad = i%8 == 0
		var d diskRecord
		g.fill(reflect.ValueOf(&d).Elem(), 0)
		checkAppendMatchesJSON(t, "record "+strconv.Itoa(i), &d)
	}
}

// FuzzAppendDiskRecordMatchesJSON drives the generator with the fuzzer's
// bytes and puts its string, float and time where the generator puts one.
func FuzzAppendDiskRecordMatchesJSON(f *testing.F) {
	f.Add([]byte{}, "", 0.0, int64(0), int64(0), 0)
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08seed"), "<\u2028\xff>", 1e-7, int64(1735787045), int64(123456789), 3600)
	f.Add([]byte(strings.Repeat("\xff", 64)), "a\"b\\c\x00", 1e21, int64(-62167219200), int64(0), -86400)
	f.Fuzz(func(t *testing.T, seed []byte, s string, fl float64, sec, nsec int64, offset int) {
		g := recordGen{r: rand.New(&bytesSource{b: seed}), bad: len(seed) > 0 && seed[0]&7 == 0, s: s, f: fl,
			t: time.Unix(sec, nsec).In(time.FixedZone("", offset%(48*3600)))}
		var d diskRecord
		g.fill(reflect.ValueOf(&d).Elem(), 0)
		checkAppendMatchesJSON(t, "fuzzed record", &d)
	})
}

// recordGen fills values with what stresses the encoding: every escaping
// class in strings, extreme numbers, times in zones and out of range,
// nil, empty and populated slices. s, f and t (a fuzzer's) are used as
// often as any other choice. Values JSON cannot hold (NaN, ±Inf, years
// outside 0-9999, zone offsets of a day) come only when bad: one of them
// makes the whole record an error, which would leave few records compared.
type recordGen struct {
	r   *rand.Rand
	bad bool
	s   string
	f   float64
	t   time.Time
}

var (
	genPieces = []string{"", "a", "ns", "<", ">", "&", `"`, `\`, "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", " ",
		"\x7f", "\u2028", "\u2029", "\xff", "\xc3", "\xed\xa0\x80", "\xf0\x9f\x98", "\ufffd", "é", "中", "😀", "</script>",
		"summary of the conversation so far: ", "\u0080", "\U0010ffff"}
	genFloats = []float64{0, math.Copysign(0, -1), 1, -1, 1.0283, 0.97, 1e21, math.Nextafter(1e21, 0), 1e-6,
		math.Nextafter(1e-6, 0), 1e-7, 123456789e-15, 5e-324, math.MaxFloat64, -math.MaxFloat64, 1e20, 12345678901234567890,
		math.NaN(), math.Inf(1), math.Inf(-1)}
	genInts  = []int64{0, 1, -1, 7, 1000, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32 - 1}
	genZones = []*time.Location{time.UTC, nil, time.FixedZone("CET", 3600), time.FixedZone("", -(9*3600 + 30*60)),
		time.FixedZone("", 5*3600+45*60+30), time.FixedZone("", 23*3600+59*60), time.FixedZone("", -24*3600)} // the last one bad
	timeType = reflect.TypeFor[time.Time]()
)

func (g *recordGen) fill(v reflect.Value, depth int) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(g.time()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(g.string())
	case reflect.Int, reflect.Int64:
		v.SetInt(g.int())
	case reflect.Float64:
		v.SetFloat(g.float())
	case reflect.Bool:
		v.SetBool(g.r.IntN(2) == 0)
	case reflect.Uint8: // history.EditKind
		v.SetUint(uint64(g.r.IntN(256)))
	case reflect.Array: // ChainHash: zero, or random bytes
		if g.r.IntN(3) > 0 {
			for i := range v.Len() {
				v.Index(i).SetUint(uint64(g.r.IntN(256)))
			}
		}
	case reflect.Struct:
		if g.r.IntN(4) == 0 { // the whole struct zero (omitzero)
			return
		}
		for i := range v.NumField() {
			if g.r.IntN(3) > 0 {
				g.fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		switch n := g.r.IntN(6); {
		case n == 0 || depth > 3:
			// nil
		case n == 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 1))
		default:
			v.Set(reflect.MakeSlice(v.Type(), n-1, n-1))
			for i := range n - 1 {
				g.fill(v.Index(i), depth+1)
			}
		}
	default:
		panic("recordGen: no rule for " + v.Type().String() + ": add one")
	}
}

func (g *recordGen) string() string {
	var b strings.Builder
	switch g.r.IntN(8) {
	case 0:
		return ""
	case 1:
		return g.s
	case 2: // random bytes
		for range g.r.IntN(40) {
			b.WriteByte(byte(g.r.IntN(256)))
		}
		return b.String()
	case 3: // a KB-long summary
		for b.Len() < 1000+g.r.IntN(3000) {
			b.WriteString(genPieces[g.r.IntN(len(genPieces))])
		}
		return b.String()
	}
	for range 1 + g.r.IntN(8) {
		b.WriteString(genPieces[g.r.IntN(len(genPieces))])
	}
	return b.String()
}

func (g *recordGen) int() int64 {
	switch g.r.IntN(4) {
	case 0:
		return genInts[g.r.IntN(len(genInts))]
	case 1:
		return int64(g.r.Uint64())
	}
	return g.r.Int64N(100000) - 1000
}

func (g *recordGen) float() float64 {
	f := g.anyFloat()
	if !g.bad && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return 1.5
	}
	return f
}

func (g *recordGen) anyFloat() float64 {
	switch g.r.IntN(6) {
	case 0:
		return g.f
	case 1:
		return math.Float64frombits(g.r.Uint64()) // any exponent, NaN now and then
	case 2:
		return g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(60)-30))
	}
	return genFloats[g.r.IntN(len(genFloats))]
}

func (g *recordGen) time() time.Time {
	var t time.Time
	switch g.r.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		t = g.t
	case 2: // any year, in range or not
		if g.bad {
			t = time.Unix(int64(g.r.Uint64()>>g.r.IntN(64)), g.r.Int64N(2e9))
		} else { // years 1 to 9998, any second of them
			t = time.Unix(g.r.Int64N(253370764800+62135596800)-62135596800, g.r.Int64N(1e9))
		}
	case 3:
		t = time.Time{}.Add(time.Duration(g.r.Int64N(1000)))
	default:
		nanos := []int64{0, 1, 120000000, 123456789, 999999999, 500}[g.r.IntN(6)]
		t = t0.Add(time.Duration(g.r.Int64N(1e6))*time.Second + time.Duration(nanos))
	}
	zones := genZones
	if !g.bad {
		zones = zones[:len(zones)-1]
	}
	if loc := zones[g.r.IntN(len(zones))]; loc != nil {
		t = t.In(loc)
	}
	return t
}

// bytesSource is a rand.Source reading the fuzzer's bytes, then a fixed
// PCG (not zeros: rand.IntN can loop forever on a
// source of zeros).
type bytesSource struct {
	b    []byte
	rest *rand.PCG
}

func (s *bytesSource) Uint64() uint64 {
	if len(s.b) == 0 {
		if s.rest == nil {
			s.rest = rand.NewPCG(18, 0)
		}
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// benchRecord is a record like the chat benchmark's after a while: one
// line with dedups and prunes, a few branches and recent summaries with
// KB-long summaries, MaxTurns turns.
func benchRecord() Record {
	r := historyRecord(keyA)
	summary := "<conversation_summary>\n" + strings.Repeat("The user asked for the failing build to be fixed. The assistant "+
		"read main.go and the tests, found that \"go vet\" rejects a format string, changed it and ran the tests again; "+
		"they passed.\n", 6) + "</conversation_summary>"
	r.Branches, r.RecentSummaries = nil, nil
	for i := range 3 {
		at := t0.Add(time.Duration(i) * time.Minute)
		r.Branches = append(r.Branches, Branch{Branch: history.Branch{Summary: summary, Covered: 40 * (i + 1), Hash: hashOf(strconv.Itoa(i)), Since: 10 * i},
			Parent: hashOf(strconv.Itoa(i - 1)), CreatedAt: at, UsedAt: at.Add(time.Second)})
		r.RecentSummaries = append(r.RecentSummaries, SummaryEntry{At: at, Summary: summary, CoveredMessages: 40 * (i + 1),
			TokensBefore: 90000, TokensAfter: 30000})
	}
	l := r.Lines[0]
	l.Dedups, l.Prunes = nil, nil
	for i := range 12 {
		l.Dedups = append(l.Dedups, history.DedupMark{Index: 3 + 4*i, Result: i % 3, Digest: hashOf("d" + strconv.Itoa(i))})
		l.Prunes = append(l.Prunes, history.PruneMark{Index: 5 + 4*i, Result: i % 2, Digest: hashOf("p" + strconv.Itoa(i)), Turn: i})
	}
	r.Lines = []Line{l}
	normalize(&r)
	return r
}

// The record of a write without its turns (encodeRecord splices them in
// after it), by encoding/json and by appendDiskRecord; then the whole
// encoding of a record, its turns included. "chat" is
// benchRecord, "small" historyRecord (short strings, two lines).
// go test -run '^$' -bench EncodeRecord -benchmem ./state/
func BenchmarkEncodeRecord(b *testing.B) {
	for _, c := range []struct {
		name string
		r    Record
	}{{"chat", benchRecord()}, {"small", historyRecord(keyA)}} {
		b.Run(c.name, func(b *testing.B) { benchEncodeRecord(b, c.r) })
	}
}

func benchEncodeRecord(b *testing.B, r Record) {
	normalize(&r)
	var d diskRecord
	if data, err := encodeRecord(&r); err != nil || json.Unmarshal(data, &d) != nil {
		b.Fatal(err)
	}
	d.Turns = nil
	want, _ := json.Marshal(&d)
	b.Logf("record %d bytes without its %d turns", len(want), len(r.Turns))
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := appendDiskRecord(make([]byte, 0, diskRecordSizeHint(&d)), &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeRecord(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
