package squash

import (
	"encoding/json"
	"strings"
)

// Detect reports which compressor fits output:
//
//   - ShapeJSON for valid JSON (usually an object or array; a lone string
//     or number is JSON too, and must stay JSON),
//   - ShapeSource when it is shaped like source code: most lines end or
//     start the way code does, some start with a keyword, many are
//     indented, and nearly none are log, test-runner, traceback or diff
//     lines (see isSource),
//   - ShapeLog when at least 3 lines are errors, warnings or stack frames,
//     when a test runner or build tool wrote it (go test, pytest, jest,
//     cargo, npm, maven, gradle, make, tsc: one line only they print is
//     enough), or when at least half of its lines carry a level field
//     (an all-INFO service log has no errors but is still a log),
//   - ShapeGeneric otherwise.
func Detect(output string) Shape {
	shape, _ := detect(output)
	return shape
}

// detect is Detect, also returning the classified lines for the log and
// generic compressors so that no line is classified twice.
func detect(output string) (Shape, *textLines) {
	t := strings.TrimLeft(output, " \t\r\n")
	if t != "" && strings.IndexByte(`{["-0123456789tfn`, t[0]) >= 0 && json.Valid([]byte(t)) {
		return ShapeJSON, nil
	}
	tl := scanText(output)
	switch {
	case tl.isSource():
		return ShapeSource, tl
	case tl.isLog():
		return ShapeLog, tl
	}
	return ShapeGeneric, tl
}

// textLines is a text split into lines, each classified.
type textLines struct {
	s     string
	spans [][2]int
	infos []lineInfo
}

func scanText(s string) *textLines {
	spans := lineSpans(s)
	infos := make([]lineInfo, len(spans))
	for i, sp := range spans {
		infos[i] = classify(s[sp[0]:sp[1]])
	}
	return &textLines{s: s, spans: spans, infos: infos}
}

func (tl *textLines) line(i int) string { return tl.s[tl.spans[i][0]:tl.spans[i][1]] }

// isLog implements the log rule of Detect.
func (tl *textLines) isLog() bool {
	signals, leveled, lines := 0, 0, 0
	for _, li := range tl.infos {
		if li.blank {
			continue
		}
		lines++
		if li.runner {
			return true
		}
		if li.cls == clsError || li.cls == clsWarn || li.frame {
			if signals++; signals >= 3 {
				return true
			}
		}
		if li.leveled {
			leveled++
		}
	}
	return leveled >= 3 && 2*leveled >= lines
}
