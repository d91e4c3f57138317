package expand

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestParseLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Lines
		bad  bool
	}{
		{"", Lines{}, false},
		{"11-390", Lines{11, 390}, false},
		{" 7 ", Lines{7, 7}, false},
		{"40-", Lines{From: 40}, false},
		{"11,390", Lines{11, 390}, false},
		{"0-3", Lines{}, true},
		{"5-2", Lines{}, true},
		{"a-b", Lines{}, true},
		{"-3", Lines{}, true},
	} {
		got, err := ParseLines(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseLines(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
		if again, err := ParseLines(got.String()); !tc.bad && (err != nil || again != got) {
			t.Errorf("ParseLines(%q.String()) = %v, %v", got, again, err)
		}
	}
}

// Slice prints what sed -n 'A,Bp' prints, on texts with and without a
// last newline and ranges past the end.
func TestSliceIsSed(t *testing.T) {
	if _, err := exec.LookPath("sed"); err != nil {
		t.Skip("no sed")
	}
	texts := []string{"a\nb\nc\n", "a\nb\nc", "", "only", "\n\n\n", "x\r\ny\r\n"}
	ranges := []Lines{{1, 1}, {2, 3}, {1, 10}, {4, 9}, {2, 2}, {From: 2}}
	for _, text := range texts {
		for _, l := range ranges {
			script := strconv.Itoa(l.From) + ",$p"
			if l.To > 0 {
				script = strconv.Itoa(l.From) + "," + strconv.Itoa(l.To) + "p"
			}
			cmd := exec.Command("sed", "-n", script)
			cmd.Stdin = strings.NewReader(text)
			want, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := Slice(text, l); got != string(want) {
				t.Errorf("Slice(%q, %v) = %q, sed prints %q", text, l, got, want)
			}
		}
		if got := Slice(text, Lines{}); got != text {
			t.Errorf("Slice(%q, whole) = %q", text, got)
		}
	}
}

// A marker names each way of the configuration and no other, in a form
// a shell runs as it is.
func TestBackNamesEachWay(t *testing.T) {
	const ref = "3f9a2c1b4d5e"
	l := Lines{11, 390}
	for _, tc := range []struct {
		ways Ways
		want string
	}{
		{Ways{}, "original kept by ctxpress as ref 3f9a2c1b4d5e"},
		{Ways{Dir: "/home/u/.cache/ctxpress/originals"}, "original intact: sed -n '11,390p' /home/u/.cache/ctxpress/originals/3f9a2c1b4d5e.txt"},
		{Ways{Dir: "/Users/Jane Doe/Library/Caches/ctxpress"}, "original intact: sed -n '11,390p' '/Users/Jane Doe/Library/Caches/ctxpress/3f9a2c1b4d5e.txt'"},
		{Ways{Tool: true}, `original intact: ctxpress_expand {"ref":"3f9a2c1b4d5e","lines":"11-390"}`},
		{Ways{URL: "http://10.0.0.5:8484/", URLHeader: "Authorization: Bearer <your API key>"},
			"original intact: curl -s -H 'Authorization: Bearer <your API key>' 'http://10.0.0.5:8484/ctxpress/expand/3f9a2c1b4d5e?lines=11-390'"},
		{Ways{Dir: "/d", Tool: true}, `original intact: sed -n '11,390p' /d/3f9a2c1b4d5e.txt or ctxpress_expand {"ref":"3f9a2c1b4d5e","lines":"11-390"}`},
	} {
		if got := tc.ways.Back(ref, l); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.ways, got, tc.want)
		}
	}
	if got := (Ways{Dir: "/d"}).Back(ref, Lines{}); got != "original intact: cat /d/3f9a2c1b4d5e.txt" {
		t.Errorf("whole: %s", got)
	}
}

func TestRef(t *testing.T) {
	if r := Ref("hello\n"); !ValidRef(r) || r != Ref("hello\n") || r == Ref("hello") {
		t.Fatalf("Ref: %q", r)
	}
	for _, bad := range []string{"", "3F9A2C1B4D5E", "3f9a2c1b4d5", "3f9a2c1b4d5e0", "../../etc/pa"} {
		if ValidRef(bad) {
			t.Errorf("ValidRef(%q)", bad)
		}
	}
}
