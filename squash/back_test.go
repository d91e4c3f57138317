package squash

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
)

// wayConfigs are the configurations a marker is written in: originals
// not kept, kept with no way of the agent's own, and each way alone and
// together.
var wayConfigs = []struct {
	name string
	ways *expand.Ways
}{
	{"not kept", nil},
	{"ref only", &expand.Ways{}},
	{"file", &expand.Ways{Dir: "/home/u/.cache/ctxpress/originals"}},
	{"tool", &expand.Ways{Tool: true}},
	{"url", &expand.Ways{URL: "http://10.0.0.5:8484"}},
	{"file and tool", &expand.Ways{Dir: "/home/u/.cache/ctxpress/originals", Tool: true}},
}

// markerOutputs are outputs of every marker kind squash writes: log and
// generic gaps, a JSON array's items and a string's chars, a read of an
// output with no file, a text inside a JSON output.
func markerOutputs(t *testing.T) map[string]struct {
	call Call
	text string
} {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	logText := read("log_gotest.input")
	var lines []string
	for i := range 400 {
		lines = append(lines, "row "+strconv.Itoa(i)+" value "+strconv.Itoa(i*7919%1000))
	}
	listing := strings.Join(lines, "\n") + "\n"
	wrapped := `{"output":` + strconv.Quote(logText) + `,"metadata":{"exit_code":1}}`
	return map[string]struct {
		call Call
		text string
	}{
		"log gaps":       {Call{Tool: "bash", Args: `{"command":"go test ./..."}`}, logText},
		"generic gaps":   {Call{Tool: "bash", Args: `{"command":"ls -R"}`}, listing},
		"json items":     {Call{Tool: "api"}, read("json_api.input")},
		"json chars":     {Call{Tool: "api"}, `{"text":"` + strings.Repeat("lorem ipsum dolor sit amet ", 200) + `"}`},
		"text in json":   {Call{Tool: "shell", Args: `{"command":["bash","-lc","go test ./..."]}`}, wrapped},
		"one long line":  {Call{Tool: "fetch"}, strings.Repeat("word ", 2000)},
		"read of output": {Call{Tool: "bash", Args: `{"command":"python gen.py | cat"}`}, strings.Repeat("def f():\n    return 1\n\n", 6000)},
	}
}

var gapMarker = regexp.MustCompile(`\[lines (\d+)-(\d+) (?:of this output )?omitted([^\]\n]*)\]`)

// TestMarkersNameOnlyTheWaysThatWork squashes an output of every marker
// kind in every configuration: a marker names each way the configuration
// has and no other, every reference it names is an original the result
// keeps (its text, byte-exact), and the lines a gap's sed command prints
// are the lines it left out.
func TestMarkersNameOnlyTheWaysThatWork(t *testing.T) {
	for name, o := range markerOutputs(t) {
		for _, cfg := range wayConfigs {
			t.Run(name+"/"+cfg.name, func(t *testing.T) {
				s := New(Config{Ways: cfg.ways, ReadMaxBytes: 16 << 10})
				r := s.ApplyCall(o.call, o.text)
				if !r.Squashed {
					t.Fatalf("not squashed: %s", r.StatsLine())
				}
				w := cfg.ways
				if w == nil {
					if len(r.Originals) != 0 || strings.Contains(r.Text, "original") {
						t.Fatalf("originals not kept, but the output points to one: %v\n%s", r.Originals, r.Text)
					}
					return
				}
				checkWays(t, r.Text, *w)
				if len(r.Originals) == 0 {
					t.Fatal("squashed with originals kept, and none kept")
				}
				byRef := map[string]string{}
				for _, k := range r.Originals {
					if k.Ref != expand.Ref(k.Text) || k.Kind != expand.KindSquash || k.Tool != o.call.Tool {
						t.Fatalf("original %s: ref of its text %s, kind %q, tool %q", k.Ref, expand.Ref(k.Text), k.Kind, k.Tool)
					}
					byRef[k.Ref] = k.Text
					if !strings.Contains(r.Text, k.Ref) {
						t.Errorf("original %s kept but no marker names it", k.Ref)
					}
				}
				for _, ref := range regexp.MustCompile(`[0-9a-f]{12}`).FindAllString(r.Text, -1) {
					if strings.Contains(o.text, ref) {
						continue // the output's own hex
					}
					if _, ok := byRef[ref]; !ok {
						t.Errorf("a marker names %s, which is not kept", ref)
					}
				}
				for i, m := range gapMarker.FindAllStringSubmatch(r.Text, -1) {
					if i == 0 && !strings.Contains(m[3], "original") {
						t.Errorf("first marker %q says nothing of the original", m[0])
					}
					if !regexp.MustCompile(`[0-9a-f]{12}`).MatchString(m[3]) {
						t.Errorf("marker %q names no original", m[0])
					}
					if w.Dir == "" {
						continue
					}
					from, _ := strconv.Atoi(m[1])
					to, _ := strconv.Atoi(m[2])
					sed := regexp.MustCompile(`sed -n '(\d+),(\d+)p' (\S+\.txt)`).FindStringSubmatch(m[3])
					if sed == nil {
						t.Fatalf("file way on, marker %q has no sed command", m[0])
					}
					ref := strings.TrimSuffix(filepath.Base(sed[3]), ".txt")
					a, _ := strconv.Atoi(sed[1])
					b, _ := strconv.Atoi(sed[2])
					got := expand.Slice(byRef[ref], expand.Lines{From: a, To: b})
					if b-a != to-from || expand.CountLines(got) != to-from+1 {
						t.Errorf("marker %q: sed prints %d lines, the gap is %d", m[0], expand.CountLines(got), to-from+1)
					}
					for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
						if len(l) > 40 && strings.Contains(r.Text, l+"\n") && !strings.Contains(l, "[x") {
							t.Errorf("marker %q: its line %q was not left out", m[0], l)
							break
						}
					}
				}
			})
		}
	}
}

// checkWays fails unless text names every way of w and none it lacks.
func checkWays(t *testing.T, text string, w expand.Ways) {
	t.Helper()
	has := func(s string) bool { return strings.Contains(text, s) }
	for _, c := range []struct {
		on   bool
		mark string
	}{
		{w.Dir != "", ".txt"},
		{w.Tool, expand.ToolName},
		{w.URL != "", "curl -s"},
		{!w.Any(), "original kept by ctxpress as ref"},
	} {
		if c.on != has(c.mark) {
			t.Errorf("ways %+v: output says %q: %v, want %v\n%s", w, c.mark, has(c.mark), c.on, text)
		}
	}
	if w.Dir != "" && !has("sed -n '") && !has("cat ") {
		t.Errorf("ways %+v: no command prints the file\n%s", w, text)
	}
	if !w.Any() == has("original intact") {
		t.Errorf("ways %+v: says the original is intact: %v", w, has("original intact"))
	}
}
