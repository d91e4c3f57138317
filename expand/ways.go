package expand

import (
	"path/filepath"
	"strconv"
	"strings"
)

// ToolName is the retrieval tool ctxpress adds to a request's tools when
// Ways.Tool is on, and answers itself.
const ToolName = "ctxpress_expand"

// Original is one text ctxpress replaced, as kept: its reference, the
// step that replaced it (a Kind), the tool whose output it was ("" for a
// compaction's messages) and the bytes.
type Original struct {
	Ref, Kind, Tool, Text string
}

// New is the Original of text replaced by the step kind in tool's output.
func New(kind, tool, text string) Original {
	return Original{Ref: Ref(text), Kind: kind, Tool: tool, Text: text}
}

// Ways are the ways back to an original that work in the running
// configuration; a marker names each of them, and no other.
type Ways struct {
	// Dir is where originals are written as plain files, REF.txt, for an
	// agent on ctxpress's machine to print with sed -n or its read tool;
	// "" when there is no such directory (ctxpress is not on the agent's
	// machine, or the directory is not writable).
	Dir string
	// Tool is on when ctxpress adds ToolName to requests that have tools
	// and answers its calls itself.
	Tool bool
	// URL is the base URL agents reach ctxpress at
	// (http://host:port), for GET /ctxpress/expand/REF; "" when agents are
	// not told of it.
	URL string
	// URLHeader is the header the URL's curl sends, with a placeholder
	// for what the agent puts there (e.g. "Authorization: Bearer <your API
	// key>"): the endpoint answers under the key of
	// the conversation's requests. "" when none is needed.
	URLHeader string
}

// File is the path of ref's file under w.Dir.
func (w Ways) File(ref string) string {
	return filepath.Join(w.Dir, ref+".txt")
}

// Any reports whether an agent has a way back of its own.
func (w Ways) Any() bool { return w.Dir != "" || w.Tool || w.URL != "" }

// Back is how a marker ends: where lines l (1-based, inclusive; both set)
// of original ref are, e.g. "original intact: sed -n '11,390p'
// /home/u/.cache/ctxpress/expand/3f9a2c1b4d5e.txt". With no way of the
// agent's own it names the reference, which the user can expand.
func (w Ways) Back(ref string, l Lines) string {
	if !w.Any() {
		return "original kept by ctxpress as ref " + ref
	}
	var b strings.Builder
	b.WriteString("original intact: ")
	sep := ""
	if w.Dir != "" {
		b.WriteString(SedCommand(w.File(ref), l))
		sep = " or "
	}
	if w.Tool {
		b.WriteString(sep)
		b.WriteString(ToolName + ` {"ref":"` + ref + `"`)
		if !l.Whole() {
			b.WriteString(`,"lines":"` + l.String() + `"`)
		}
		b.WriteString("}")
		sep = " or "
	}
	if w.URL != "" {
		b.WriteString(sep)
		b.WriteString("curl -s ")
		if w.URLHeader != "" {
			b.WriteString("-H '" + strings.ReplaceAll(w.URLHeader, "'", `'\''`) + "' ")
		}
		b.WriteString("'" + strings.TrimRight(w.URL, "/") + "/ctxpress/expand/" + ref)
		if !l.Whole() {
			b.WriteString("?lines=" + l.String())
		}
		b.WriteString("'")
	}
	return b.String()
}

// SedCommand is the command that prints lines l of file: sed -n 'A,Bp'
// FILE, or cat FILE for the whole of it. The path is quoted when a shell
// would split it.
func SedCommand(file string, l Lines) string {
	if strings.ContainsAny(file, " '\"$`\\;&|<>()*?[]#~!{}\t") {
		file = "'" + strings.ReplaceAll(file, "'", `'\''`) + "'"
	}
	switch {
	case l.Whole():
		return "cat " + file
	case l.From == l.To:
		return "sed -n '" + strconv.Itoa(l.From) + "p' " + file
	case l.To == 0:
		return "sed -n '" + strconv.Itoa(l.From) + ",$p' " + file
	}
	return "sed -n '" + strconv.Itoa(l.From) + "," + strconv.Itoa(l.To) + "p' " + file
}

// AllLines is the range of every line of text: Lines{1, n}, or the whole
// text (cat) when it is one line.
func AllLines(text string) Lines {
	n := CountLines(text)
	if n <= 1 {
		return Lines{}
	}
	return Lines{From: 1, To: n}
}
