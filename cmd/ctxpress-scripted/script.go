package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
)

// The format-neutral half of the server: what a request is once a format
// adapter (chat.go) has read it, what the script answers, and the prefix
// cache. A new wire format only adds an adapter.

// Request kinds: an agent turn offers tools, a side request (a title, a
// sub-agent's one-shot) offers none, a summary is ctxpress's own call.
const (
	kindAgent   = "agent"
	kindSide    = "side"
	kindSummary = "summary"
)

// prompt is a parsed request, whatever its format.
type prompt struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// Rendered is what a model would prefill, in order: the tools' raw
	// bytes, then each message's raw bytes, each on its own line. Field
	// order in the body does not matter to a provider's prompt cache, the
	// order of tools and messages does, and so does every byte of them.
	Rendered []byte
	// Parts are the byte lengths of the pieces of Rendered (tools first),
	// to say which message a divergence falls in.
	Parts    []int
	Tools    []tool
	LastUser string // text of the last user message, summary block removed
	Kind     string
	Warnings []string // accepted, but a strict chat template would refuse it
}

// tool is one function the client offers.
type tool struct {
	Name   string
	Schema map[string]any // JSON schema of the arguments (may be nil)
}

// toolCall is an answer that asks the client to run a tool.
type toolCall struct {
	ID        string
	Name      string
	Arguments string // JSON
}

// answer is what the script replies: tool calls (several at once for a
// par: step), or text.
type answer struct {
	Text  string
	Calls []toolCall
	// Compaction: the answer is one compaction item (Responses), to a
	// request that asked for it.
	Compaction bool
}

// usage is what the server reports.
type usage struct {
	Prompt, Completion, Cached int
}

// step is one scripted tool turn: a shell command, a file read through
// the client's read tool (a shell cat where it has none), or a call of a
// tool the client names (Tool), such as Claude Code's Agent.
type step struct {
	Read bool
	// Follow: run the command the last ctxpress marker of the
	// conversation gives for the lines it left out (sed -n 'A,Bp' FILE),
	// as a model that needs them would.
	Follow bool
	Tool   string // the tool to call, Arg its JSON arguments
	Arg    string
}

// parStep is a step of several calls in one assistant message:
// "par:STEP|||STEP...".
type parStep []step

// parseSteps reads a -step value: a par: list of steps, or one step.
func parseSteps(s string) parStep {
	if p, ok := strings.CutPrefix(s, "par:"); ok {
		var out parStep
		for _, one := range strings.Split(p, "|||") {
			out = append(out, parseStep(strings.TrimSpace(one)))
		}
		return out
	}
	return parStep{parseStep(s)}
}

// parseStep reads "read:PATH", "tool:NAME JSON", "follow:", "sh:COMMAND"
// or a bare COMMAND.
func parseStep(s string) step {
	if s == "follow:" {
		return step{Follow: true}
	}
	if p, ok := strings.CutPrefix(s, "read:"); ok {
		return step{Read: true, Arg: p}
	}
	if p, ok := strings.CutPrefix(s, "tool:"); ok {
		name, args, _ := strings.Cut(p, " ")
		return step{Tool: name, Arg: strings.TrimSpace(args)}
	}
	return step{Arg: strings.TrimPrefix(s, "sh:")}
}

var (
	shellToolNames = []string{"bash", "Bash", "run_shell_command", "shell", "shell_command", "exec_command", "local_shell", "execute_bash", "terminal"}
	readToolNames  = []string{"read", "Read", "read_file", "view", "ReadFile"}
	cmdProps       = []string{"command", "cmd"}
	pathProps      = []string{"filePath", "file_path", "absolute_path", "path"}
)

// callFor builds the tool call for st from the tools the client offers, with
// arguments valid for the tool's schema, or reports that no tool fits.
func callFor(st step, tools []tool, workdir, id string) (*toolCall, error) {
	if st.Tool != "" {
		t, ok := findTool(tools, []string{st.Tool})
		if !ok {
			return nil, fmt.Errorf("no tool %s among %d offered", st.Tool, len(tools))
		}
		args := map[string]any{}
		if st.Arg != "" {
			if err := json.Unmarshal([]byte(st.Arg), &args); err != nil {
				return nil, fmt.Errorf("tool:%s arguments: %w", st.Tool, err)
			}
		}
		return newCall(id, t.Name, fillRequired(t.Schema, args, workdir))
	}
	if st.Read {
		if t, ok := findTool(tools, readToolNames); ok {
			path := st.Arg
			if workdir != "" && !filepath.IsAbs(path) {
				path = filepath.Join(workdir, path)
			}
			args := fillRequired(t.Schema, map[string]any{propOf(t.Schema, pathProps, "filePath"): path}, workdir)
			return newCall(id, t.Name, args)
		}
		st = step{Arg: "cat " + st.Arg}
	}
	t, ok := findTool(tools, shellToolNames)
	if !ok {
		return nil, fmt.Errorf("no shell tool among %d offered", len(tools))
	}
	prop := propOf(t.Schema, cmdProps, "command")
	var cmd any = st.Arg
	if propType(t.Schema, prop) == "array" { // codex's shell: argv
		cmd = []string{"bash", "-lc", st.Arg}
	}
	return newCall(id, t.Name, fillRequired(t.Schema, map[string]any{prop: cmd}, workdir))
}

func newCall(id, name string, args map[string]any) (*toolCall, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return &toolCall{ID: id, Name: name, Arguments: string(b)}, nil
}

func findTool(tools []tool, names []string) (tool, bool) {
	for _, n := range names {
		for _, t := range tools {
			if t.Name == n {
				return t, true
			}
		}
	}
	return tool{}, false
}

func properties(schema map[string]any) map[string]any {
	p, _ := schema["properties"].(map[string]any)
	return p
}

// propOf returns the first of names the schema has, else def.
func propOf(schema map[string]any, names []string, def string) string {
	props := properties(schema)
	for _, n := range names {
		if _, ok := props[n]; ok {
			return n
		}
	}
	return def
}

func propType(schema map[string]any, prop string) string {
	p, _ := properties(schema)[prop].(map[string]any)
	t, _ := p["type"].(string)
	return t
}

// fillRequired gives every required property args lacks a value of its
// type, so the client's own validation accepts the call.
func fillRequired(schema map[string]any, args map[string]any, workdir string) map[string]any {
	req, _ := schema["required"].([]any)
	for _, r := range req {
		name, _ := r.(string)
		if _, ok := args[name]; ok || name == "" {
			continue
		}
		switch propType(schema, name) {
		case "integer", "number":
			args[name] = 30000
		case "boolean":
			args[name] = false
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			switch {
			case name == "description":
				args[name] = "scripted step"
			case strings.Contains(strings.ToLower(name), "dir") && workdir != "":
				args[name] = workdir
			default:
				args[name] = "scripted"
			}
		}
	}
	return args
}

// kindOf tells a summary call, a side request and an agent turn apart.
func kindOf(lastUser string, tools int) string {
	switch {
	case compactor.IsSummaryPrompt(lastUser):
		return kindSummary
	case tools == 0:
		return kindSide
	}
	return kindAgent
}

// askText is a user message's text without a leading ctxpress summary
// block, so a compaction that merges the block into the ask does not make
// it a new ask.
func askText(s string) string {
	if i := strings.Index(s, "</conversation_summary>"); i >= 0 {
		s = s[i+len("</conversation_summary>"):]
	}
	return strings.TrimSpace(s)
}

// lcp is the length of the longest common prefix of a and b.
func lcp(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// partAt is the index of the part (0: tools, i: message i-1) byte off falls
// in.
func partAt(parts []int, off int) int {
	for i, n := range parts {
		if off < n {
			return i
		}
		off -= n
	}
	return len(parts)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}

// summaryText is the answer to a summary call: every section of the
// template, so a summary validator accepts it.
func summaryText(n int) string {
	var b strings.Builder
	for _, line := range strings.Split(compactor.SummaryTemplate, "\n") {
		if strings.HasPrefix(line, "## ") {
			fmt.Fprintf(&b, "%s\nScripted summary %d: %s.\n\n", line, n, strings.ToLower(line[3:]))
		}
	}
	return strings.TrimSpace(b.String())
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// markerCommand is a ctxpress marker's way to the lines it left out
// through the original's file, in a body's raw JSON (a quote may be
// escaped there).
var markerCommand = regexp.MustCompile(`sed -n (?:'|\\u0027)(\d+),(\d+)p(?:'|\\u0027) ([^\s\]"\\]+\.txt)`)

// followMarker returns the command of the last marker in rendered.
func followMarker(rendered []byte) (string, bool) {
	all := markerCommand.FindAllSubmatch(rendered, -1)
	if len(all) == 0 {
		return "", false
	}
	m := all[len(all)-1]
	return "sed -n '" + string(m[1]) + "," + string(m[2]) + "p' " + string(m[3]), true
}
