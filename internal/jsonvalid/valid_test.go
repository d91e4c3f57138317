package jsonvalid

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// check asserts that Valid(data) == want and that the oracle,
// gjson.ValidBytes, agrees with want. name is only formatted on failure.
func check(t *testing.T, data []byte, want bool, name string, args ...any) bool {
	t.Helper()
	ok := true
	if got := gjson.ValidBytes(data); got != want {
		t.Errorf("%s: oracle gjson.ValidBytes(%q) = %v, test expects %v", fmt.Sprintf(name, args...), clip(data), got, want)
		ok = false
	}
	if got := Valid(data); got != want {
		t.Errorf("%s: Valid(%q) = %v, want %v", fmt.Sprintf(name, args...), clip(data), got, want)
		ok = false
	}
	return ok
}

// agree asserts Valid(data) == gjson.ValidBytes(data).
func agree(t *testing.T, data []byte, name string, args ...any) bool {
	t.Helper()
	want := gjson.ValidBytes(data)
	if got := Valid(data); got != want {
		t.Errorf("%s: Valid(%q) = %v, gjson.ValidBytes = %v", fmt.Sprintf(name, args...), clip(data), got, want)
		return false
	}
	return true
}

func clip(b []byte) []byte {
	if len(b) > 200 {
		return append(append(b[:100:100], "…"...), b[len(b)-100:]...)
	}
	return b
}

var tableCases = []struct {
	in   string
	want bool
}{
	// Empty input and whitespace.
	{"", false},
	{" ", false},
	{" \t\r\n", false},
	{"\f1", false}, // form feed is not whitespace
	{"1\v", false},
	{"\u00a01", false},  // NBSP is not whitespace
	{"\ufeff{}", false}, // BOM is not accepted
	{" \t\r\n1 \t\r\n", true},
	{"1 ", true},
	{"{} ", true},
	{"{}\n\n\n\n\n\n\n\n\n\n\n", true},
	{"[1]                              ", true},
	{"                                 [1]", true},
	{"[                                 1                                 ]", true},
	{"\x00", false},
	{"1\x00", false},

	// Literals.
	{"true", true},
	{"false", true},
	{"null", true},
	{"tru", false},
	{"t", false},
	{"fals", false},
	{"f", false},
	{"nul", false},
	{"n", false},
	{"True", false},
	{"NULL", false},
	{"truee", false},
	{"true false", false},
	{"nulll", false},
	{"[true,false,null]", true},
	{"[tru]", false},
	{"[truex]", false},
	{"[nul", false},
	{"NaN", false},
	{"Infinity", false},
	{"-Infinity", false},
	{"undefined", false},

	// Numbers.
	{"0", true},
	{"-0", true},
	{"-0.0", true},
	{"1", true},
	{"123456789012345678901234567890", true},
	{"-1", true},
	{"1.5", true},
	{"0.5", true},
	{"1e5", true},
	{"1E5", true},
	{"1e+5", true},
	{"1e-5", true},
	{"1.5e10", true},
	{"-1.25E-300", true},
	{"0e0", true},
	{"0E+0", true},
	{"1e0005", true},
	{"01", false},
	{"00", false},
	{"-01", false},
	{"1.", false},
	{"1.e5", false},
	{".5", false},
	{"-", false},
	{"--1", false},
	{"+1", false},
	{"-a", false},
	{"- 1", false},
	{"1e", false},
	{"1E", false},
	{"1e+", false},
	{"1e-", false},
	{"1e+-5", false},
	{"1ee5", false},
	{"1e5.5", false},
	{"1.5.5", false},
	{"0x10", false},
	{"1_000", false},
	{"1 2", false},
	{"[1,2]", true},
	{"[01]", false},
	{"[1.]", false},
	{"[-]", false},
	{"[1e]", false},
	{"[1e+]", false},
	{"[-0,0.0,1e-0]", true},
	{`{"a":-}`, false},
	{`{"a":1.}`, false},
	{`{"a":01}`, false},
	{`{"a":0}`, true},
	{`{"a":1e9}`, true},

	// Strings and escapes.
	{`""`, true},
	{`"abc"`, true},
	{`"`, false},
	{`"abc`, false},
	{`"\"`, false},
	{`"\\"`, true},
	{`"\"\\\/\b\f\n\r\t"`, true},
	{`"\a"`, false},
	{`"\x41"`, false},
	{`"\0"`, false},
	{`"\'"`, false},
	{`"\U0041"`, false},
	{`"\u0041"`, true},
	{`"\uABCD\uabcd\u09aF"`, true},
	{`"\u00"`, false},
	{`"\u004"`, false},
	{`"\u004g"`, false},
	{`"\uG000"`, false},
	{`"\u 000"`, false},
	{`"\u"`, false},
	{`"\u12`, false},
	{`"\ud800"`, true},         // lone surrogate accepted
	{`"\udc00\ud800"`, true},   // reversed pair accepted
	{`"\ud83d\ude80"`, true},   // proper pair
	{"\"\\", false},            // backslash at EOF
	{"\"\\u", false},           // \u at EOF
	{"\"\\u123", false},        // \u truncated at EOF
	{"\"a\tb\"", false},        // raw tab
	{"\"a\nb\"", false},        // raw newline
	{"\"\x00\"", false},        // raw NUL
	{"\"\x1f\"", false},        // raw unit separator
	{"\" \"", true},            // 0x20 is the first allowed byte
	{"\"\x7f\"", true},         // DEL is allowed
	{"\"\xff\xfe\"", true},     // invalid UTF-8 accepted
	{"\"\xc3\"", true},         // truncated UTF-8 accepted
	{"\"\xed\xa0\x80\"", true}, // encoded surrogate accepted
	{"\"\xc0\xaf\"", true},     // overlong encoding accepted
	{"\"日本語 🚀\"", true},        // valid UTF-8
	{"\xff", false},            // invalid UTF-8 outside a string
	{`"a""b"`, false},
	{`"a" "b"`, false},
	{`'a'`, false},
	{`["\"]`, false},
	{`["\\"]`, true},
	{`["a\"b"]`, true},
	{`{"\u0041":"\u0042"}`, true},
	{`{"\u004":1}`, false},
	{"{\"a\nb\":1}", false},

	// Objects.
	{"{}", true},
	{"{ }", true},
	{`{"a":1}`, true},
	{` { "a" : 1 , "b" : [ ] } `, true},
	{`{"a":1,"a":2}`, true}, // duplicate keys accepted
	{"{", false},
	{"}", false},
	{"{}}", false},
	{`{"a"}`, false},
	{`{"a":}`, false},
	{`{"a" 1}`, false},
	{`{"a"::1}`, false},
	{`{"a":1,}`, false},
	{`{"a":1 "b":2}`, false},
	{`{,"a":1}`, false},
	{`{,}`, false},
	{`{1:1}`, false},
	{`{a:1}`, false},
	{`{null:1}`, false},
	{`{"a":1]`, false},
	{`{"a":1`, false},
	{`{"a":1,`, false},
	{`{"a":`, false},
	{`{"a"`, false},
	{`{"a`, false},
	{`{"a":1}{}`, false},
	{`{"a":1},`, false},

	// Arrays.
	{"[]", true},
	{"[ ]", true},
	{"[[]]", true},
	{"[[],[]]", true},
	{"[{}]", true},
	{"[{},{}]", true},
	{`{"a":[]}`, true},
	{`{"a":{}}`, true},
	{`{"a":[{}],"b":{"c":[]}}`, true},
	{"[[[[[[[[[[]]]]]]]]]]", true},
	{"[[[[[[[[[[]]]]]]]]]", false},
	{"[[[[[[[[[]]]]]]]]]]", false},
	{"[", false},
	{"]", false},
	{"[]]", false},
	{"[[]", false},
	{"[,]", false},
	{"[,1]", false},
	{"[1,]", false},
	{"[1,,2]", false},
	{"[1 2]", false},
	{"[1}", false},
	{"[}", false},
	{"{]", false},
	{"[{]}", false},
	{"[{}}", false},
	{`[1,`, false},
	{`[1`, false},
	{`[[1],[2]]`, true},
	{`[][]`, false},
	{`[] []`, false},
	{`[],`, false},
	{"[\"a\",\"b\" , \"c\"\t]", true},
	{"[\"a\"\r\n,\"b\"]", true},
	{`[true,{"a":[null,{"b":"c"}]},-1.5e+3,"x"]`, true},
}

func TestTable(t *testing.T) {
	for _, tc := range tableCases {
		check(t, []byte(tc.in), tc.want, "%q", tc.in)
		// Nested inside containers, every case keeps its validity. Empty
		// and whitespace-only inputs are skipped: they become missing
		// values.
		if strings.TrimLeft(tc.in, " \t\r\n") != "" {
			check(t, []byte("["+tc.in+"]"), tc.want, "array")
			check(t, []byte(`{"k":`+tc.in+"}"), tc.want, "object")
			check(t, []byte(`[0,`+tc.in+`]`), tc.want, "array-tail")
		}
	}
}

// TestSpecialAtEveryOffset places each special string byte sequence at
// every position (hence every offset relative to 8- and 16-byte words) of
// strings of many lengths, followed by various amounts of whitespace.
func TestSpecialAtEveryOffset(t *testing.T) {
	specials := []struct {
		s     string
		valid bool
	}{
		{``, true},
		{`\"`, true},
		{`\\`, true},
		{`\/`, true},
		{`\n`, true},
		{`\t`, true},
		{`\b\f\r`, true},
		{`\u00e9`, true},
		{`\uD83D\uDE80`, true},
		{`\\\"`, true},
		{"é", true},
		{"🚀", true},
		{"\x7f", true},
		{"\x80", true},
		{"\xff", true},
		{" ", true},
		{"!", true},    // 0x21, just above '"' - 1
		{"#", true},    // 0x23, just above '"'
		{"[", true},    // 0x5b, just below '\\'
		{"]", true},    // 0x5d, just above '\\'
		{"\xa2", true}, // '"' | 0x80
		{"\xdc", true}, // '\\' | 0x80
		{"\xa0", true}, // ' ' | 0x80
		{`"`, false},   // ends the string early: trailing garbage
		{`\`, false},
		{`\x`, false},
		{`\u00g0`, false},
		{`\u00`, false},
		{"\\\x00", false},
		{"\x00", false},
		{"\x01", false},
		{"\t", false},
		{"\n", false},
		{"\x1f", false},
	}
	// No hex digits and no escape letters, so neither a lone backslash nor a
	// short \u00 special can be completed by the filler.
	filler := strings.Repeat("ghijklmopqsvwxyzGHIJKLMNOPQRSTUVWXYZ_!#$%&'()*+-.;<=>?@^|~", 2)
	// Word boundaries are relative to the start of the string; the distance
	// to the end of the input decides where the word loop hands over to the
	// byte-at-a-time tail, so vary what follows the string too.
	trailers := []string{"", " ", "       ", "        ", "         ", strings.Repeat(" ", 31), strings.Repeat(" ", 32), strings.Repeat(" ", 33), strings.Repeat(" ", 40)}
	n := 0
	for _, sp := range specials {
		for strLen := range 72 {
			for pos := 0; pos <= strLen; pos++ {
				content := filler[:pos] + sp.s + filler[pos:strLen]
				for _, tr := range trailers {
					check(t, []byte(`"`+content+`"`+tr), sp.valid, "pos=%d trailer=%d", pos, len(tr))
				}
				// As a key, then as a value after some other values.
				in := `{"` + content + `":[` + strings.Repeat("1,", pos%9) + `"` + content + `"]}`
				check(t, []byte(in), sp.valid, "key")
				// Truncated (unterminated unless a raw '"' was placed).
				for cut := 0; cut < len(content); cut += 3 {
					agree(t, []byte(`"`+content[:len(content)-cut]+strings.Repeat(" ", cut%40)), "truncated")
				}
				n++
			}
		}
	}
	t.Logf("%d placements", n)
}

// TestNumbersEverywhere checks every prefix and every single-byte edit of a
// set of numbers, in top-level and nested positions.
func TestNumbersEverywhere(t *testing.T) {
	nums := []string{"0", "-0", "12", "-12.5", "0.001", "1e5", "-1E-5", "6.02e+23", "9007199254740993"}
	edits := []byte("0123456789-+.eE ,]}x\"")
	for _, num := range nums {
		for _, wrap := range []string{"%s", "[%s]", `{"a":%s}`, "[%s,1]", ` %s `} {
			for i := 0; i <= len(num); i++ {
				agree(t, fmt.Appendf(nil, wrap, num[:i]), "prefix")
				for _, c := range edits {
					b := []byte(num)
					if i < len(b) {
						b[i] = c
					} else {
						b = append(b, c)
					}
					agree(t, fmt.Appendf(nil, wrap, b), "edit")
					agree(t, fmt.Appendf(nil, wrap, num[:i]+string(c)+num[i:]), "insert")
				}
			}
		}
	}
}

// TestAllShortInputs compares every input of length <= 3 over a small
// alphabet that covers every token class, and random longer inputs over it.
func TestAllShortInputs(t *testing.T) {
	alpha := []byte(`{}[]:," \-0.1e+tu\x`)
	alpha = append(alpha, 0, '\n', 'n', 'l', 'f', 'a', 's', 0xff)
	var rec func(prefix []byte, depth int)
	rec = func(prefix []byte, depth int) {
		agree(t, prefix, "short")
		if depth == 0 {
			return
		}
		for _, c := range alpha {
			rec(append(prefix, c), depth-1)
		}
	}
	rec(nil, 3)

	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"{", "}", "[", "]", ":", ",", " ", `"`, `\`, `"a"`, `"\u00e9"`, `\u`, "0", "-", "1.5", "e", "true", "null", "false", "\n", "x"}
	iters := 200000
	if testing.Short() {
		iters = 20000
	}
	for range iters {
		var b []byte
		for range 1 + r.IntN(12) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		if !agree(t, b, "random") {
			return
		}
	}
}

func TestDeepNesting(t *testing.T) {
	// Depths gjson itself handles: compare.
	for _, depth := range []int{63, 64, 65, 1023, 1024, 1025, 5000, 100000} {
		arr := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		check(t, arr, true, "arrays depth %d", depth)
		check(t, arr[:len(arr)-1], false, "unbalanced")
		check(t, arr[1:], false, "unbalanced")

		// Alternating objects and arrays so that the kind stack matters
		// across word boundaries: {"a":[{"a":[ ... ]}]}
		var b bytes.Buffer
		for i := range depth {
			if i%2 == 0 {
				b.WriteString(`{"a":`)
			} else {
				b.WriteString(`[1,`)
			}
		}
		b.WriteString("0")
		for i := depth - 1; i >= 0; i-- {
			if i%2 == 0 {
				b.WriteString(`,"z":2}`)
			} else {
				b.WriteString(`,3]`)
			}
		}
		mixed := b.Bytes()
		check(t, mixed, true, "mixed depth %d", depth)
		// Swap one closer deep inside: '}' <-> ']' must be detected.
		for _, k := range []int{1, 2, 63, 64, 65, depth / 2, depth - 1} {
			if k <= 0 || k >= depth {
				continue
			}
			m := bytes.Clone(mixed)
			idx := len(m)
			for range k {
				idx = bytes.LastIndexAny(m[:idx], "]}")
			}
			if m[idx] == '}' {
				m[idx] = ']'
			} else {
				m[idx] = '}'
			}
			check(t, m, false, "mixed depth %d swapped closer %d", depth, k)
		}
	}

	// Depths where gjson would overflow the goroutine stack: Valid must
	// neither crash nor do more than linear work. Its index only moves
	// forward, so what depends on the depth is the container stack: one
	// bit per open level, grown by append. Counted, that is a few dozen
	// allocations at any depth and under a byte per level in all (about
	// 5/8 with append's growth); a byte or an allocation per level, or a
	// stack that is copied whole as it grows, is far over either bound.
	for _, tc := range []struct {
		body  []byte
		depth int
		want  bool
	}{
		{bytes.Repeat([]byte("["), 64<<20), 64 << 20, false},
		{[]byte(strings.Repeat(`{"a":[`, 2_000_000) + "1" + strings.Repeat("]}", 2_000_000)), 4_000_000, true},
		{[]byte(strings.Repeat("[", 10_000_000) + strings.Repeat("]", 10_000_000)), 10_000_000, true},
		{[]byte(strings.Repeat("[", 10_000_000) + strings.Repeat("]", 10_000_000) + "]"), 10_000_000, false},
	} {
		var got bool
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		allocs := testing.AllocsPerRun(1, func() { got = Valid(tc.body) })
		runtime.ReadMemStats(&after)
		if got != tc.want {
			t.Errorf("deep %q: Valid = %v, want %v", clip(tc.body), got, tc.want)
		}
		// AllocsPerRun ran Valid twice (a warm-up and the run).
		bytesPerRun := (after.TotalAlloc - before.TotalAlloc) / 2
		t.Logf("depth %d: %v allocations, %d bytes", tc.depth, allocs, bytesPerRun)
		if allocs > 64 || bytesPerRun > uint64(tc.depth) {
			t.Errorf("depth %d: %v allocations and %d bytes: more than a growing bit per level", tc.depth, allocs, bytesPerRun)
		}
	}
}

func TestLargeBodies(t *testing.T) {
	for seed := range uint64(4) {
		body := chatBody(seed, 500<<10)
		for name, b := range map[string][]byte{
			"compact": body,
			"pretty":  prettyBody(body),
			"ascii":   asciiBody(body),
		} {
			check(t, b, true, "seed %d %s (%d bytes)", seed, name, len(b))
			check(t, append(bytes.Clone(b), " \n\t\r"...), true, "trailing ws")
			check(t, b[:len(b)-1], false, "truncated")
			check(t, append(bytes.Clone(b), '}'), false, "trailing junk")
		}
	}
}

// corruptions are the byte values written over a body's bytes.
var corruptions = []byte{'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\n', 0, 0x1f, 'x', 'u', '0', '-', '.', 'e', 0x7f, 0xff}

func TestCorruptedBodies(t *testing.T) {
	// Every position of a small body: every corruption, deletion and
	// truncation.
	small := smallChatBody(7)
	check(t, small, true, "small body")
	buf := make([]byte, len(small))
	for i := range small {
		for _, c := range corruptions {
			copy(buf, small)
			buf[i] = c
			if !agree(t, buf, "small[%d]=%q", i, c) {
				return
			}
		}
		agree(t, append(append([]byte{}, small[:i]...), small[i+1:]...), "delete %d", i)
		agree(t, small[:i], "truncate %d", i)
	}

	// Random positions of large bodies (plain, pretty and ascii-escaped).
	r := rand.New(rand.NewPCG(3, 4))
	iters := 300
	if testing.Short() || raceEnabled {
		iters = 20
	}
	for seed := range uint64(2) {
		body := chatBody(100+seed, 500<<10)
		for _, b := range [][]byte{body, prettyBody(body), asciiBody(body)} {
			buf := bytes.Clone(b)
			for range iters {
				i := r.IntN(len(b))
				// Bias half of the positions towards the last few KB so
				// that both validators scan almost everything first.
				if r.IntN(2) == 0 {
					i = len(b) - 1 - r.IntN(min(len(b), 4096))
				}
				c := corruptions[r.IntN(len(corruptions))]
				old := buf[i]
				buf[i] = c
				ok := agree(t, buf, "large[%d]=%q", i, c)
				buf[i] = old
				if !ok {
					return
				}
			}
		}
	}
}

// TestValidAfterElementAtEveryMessageEnd reads generated chat bodies from
// the end of each of their messages, whole and with one byte after that
// point corrupted, and expects Valid's answer every time.
func TestValidAfterElementAtEveryMessageEnd(t *testing.T) {
	for seed := range uint64(6) {
		body := smallChatBody(seed)
		ends := messageEnds(t, body)
		for _, end := range ends {
			for k := end; k <= len(body); k += max(1, (len(body)-end)/40) {
				b := bytes.Clone(body)
				if k < len(b) {
					b[k] ^= "\"\\{}[],:x"[k%9]
				}
				if got, want := ValidAfterElement(b, end), gjson.ValidBytes(b); got != want {
					t.Fatalf("seed %d, from %d, byte %d changed: ValidAfterElement = %v, gjson = %v", seed, end, k, got, want)
				}
			}
		}
	}
}

// messageEnds is the offset just past each element of body's messages.
func messageEnds(t *testing.T, body []byte) []int {
	t.Helper()
	var ends []int
	msgs := gjson.GetBytes(body, "messages")
	msgs.ForEach(func(_, m gjson.Result) bool {
		ends = append(ends, m.Index+len(m.Raw))
		return true
	})
	if len(ends) == 0 {
		t.Fatal("no messages")
	}
	return ends
}
