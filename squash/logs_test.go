package squash

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// errorLevels are the loghub Level values that mark an error-level event.
// Decided per system from the _structured.csv files: Android uses logcat
// letters (E), Apache "error", BGL FATAL/ERROR/SEVERE, Hadoop ERROR/FATAL,
// Zookeeper ERROR. HDFS, OpenStack, Spark and Windows have only INFO/WARN
// levels; Linux's Level column holds the host name ("combo"); HPC,
// HealthApp, Mac, OpenSSH, Proxifier and Thunderbird have no Level column.
// Those systems have no error-level templates to check.
var errorLevels = map[string]bool{
	"ERROR": true, "FATAL": true, "SEVERE": true, "CRITICAL": true, "E": true, "F": true, "error": true,
}

type logEvent struct {
	level, id string
}

// readStructured returns the level and event id of every line, by line index.
func readStructured(t *testing.T, path string) []logEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.LazyQuotes = true
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	lv, hasLevel := col["Level"]
	id := col["EventId"]
	out := make([]logEvent, 0, len(rows)-1)
	for _, row := range rows[1:] {
		e := logEvent{id: row[id]}
		if hasLevel {
			e.level = row[lv]
		}
		out = append(out, e)
	}
	return out
}

// originalIndex maps a kept output line back to the input line it came from:
// it strips the " [xN]" count and, for a line cut in the middle, matches the
// kept head.
func originalIndex(out string, byText map[string]int, lines []string) int {
	out = strings.TrimSuffix(out, "\r")
	if i := strings.LastIndex(out, " [x"); i >= 0 && strings.HasSuffix(out, "]") && isDigits(out[i+3:len(out)-1]) {
		out = out[:i]
	}
	if i, ok := byText[out]; ok {
		return i
	}
	if k := strings.Index(out, "…["); k > 0 {
		head := out[:k]
		for i, l := range lines {
			if strings.HasPrefix(l, head) {
				return i
			}
		}
	}
	return -1
}

// TestCorpusLogsKeepEveryErrorTemplate squashes every loghub log and checks
// that each distinct error-level event present in the input is represented
// by a kept line, and that the logs shrink by at least 90% overall.
func TestCorpusLogsKeepEveryErrorTemplate(t *testing.T) {
	dir := filepath.Join(corpusDir(t), "logs")
	logs, _ := filepath.Glob(filepath.Join(dir, "*_2k.log"))
	if len(logs) == 0 {
		t.Skip("no logs in corpus")
	}
	s := New(Config{})
	var totBefore, totAfter, totKept, totErr int
	t.Logf("%-12s %6s %8s %8s %7s %s", "log", "shape", "tokens", "after", "saved", "error templates kept/total")
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		in := string(data)
		events := readStructured(t, path+"_structured.csv")
		lines := strings.Split(strings.TrimSuffix(in, "\n"), "\n")
		if len(lines) != len(events) {
			t.Fatalf("%s: %d lines, %d csv rows", path, len(lines), len(events))
		}
		res := s.Apply("bash", in)
		byText := make(map[string]int, len(lines))
		for i, l := range lines {
			l = strings.TrimSuffix(l, "\r") // some loghub files use CRLF
			lines[i] = l
			if _, ok := byText[l]; !ok {
				byText[l] = i
			}
		}
		want := map[string]bool{}
		for _, e := range events {
			if errorLevels[e.level] {
				want[e.id] = true
			}
		}
		got := map[string]bool{}
		for _, o := range strings.Split(res.Text, "\n") {
			if i := originalIndex(o, byText, lines); i >= 0 && want[events[i].id] {
				got[events[i].id] = true
			}
		}
		name := strings.TrimSuffix(filepath.Base(path), "_2k.log")
		saved := 100 * float64(res.TokensBefore-res.TokensAfter) / float64(res.TokensBefore)
		t.Logf("%-12s %6s %8d %8d %6.1f%% %d/%d", name, res.Shape, res.TokensBefore, res.TokensAfter, saved, len(got), len(want))
		for id := range want {
			if !got[id] {
				t.Errorf("%s: error event %s lost", name, id)
			}
		}
		totBefore += res.TokensBefore
		totAfter += res.TokensAfter
		totKept += len(got)
		totErr += len(want)
	}
	saved := 100 * float64(totBefore-totAfter) / float64(totBefore)
	t.Logf("%-12s %6s %8d %8d %6.1f%% %d/%d", "TOTAL", "", totBefore, totAfter, saved, totKept, totErr)
	if saved < 90 {
		t.Errorf("logs shrank by %.1f%% overall, want >= 90%%", saved)
	}
}
