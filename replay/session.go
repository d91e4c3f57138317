package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Format is a request's wire format.
type Format string

// The formats a session may be in.
const (
	Chat      Format = "chat"      // OpenAI chat completions
	Responses Format = "responses" // OpenAI Responses
	Messages  Format = "messages"  // Anthropic Messages
)

// Path is where a request of f is posted, under a base URL ending in /v1.
func (f Format) Path() string {
	switch f {
	case Responses:
		return "/responses"
	case Messages:
		return "/messages"
	}
	return "/chat/completions"
}

// ParseFormat reads a -format value; "" means detect.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "", Chat, Responses, Messages:
		return f, nil
	}
	return "", fmt.Errorf("format %q: want chat, responses or messages", s)
}

// Session is one recorded session: its requests in the order the client
// sent them.
type Session struct {
	Name     string // the file's base name; also its X-Session-ID
	Format   Format
	Requests [][]byte
	// Err is why the file could not be read as a session; Run reports it
	// as failed and goes on with the others.
	Err error
}

// Load reads the sessions in paths: a file is one session (a .jsonl file
// holds one request per line; any other file one body holding a whole
// run, replayed turn by turn), a directory every *.json and *.jsonl in it,
// by name. format "" detects each file's format by shape. Each request's
// model is set to model. A file that is not a session is returned with
// its Err; a path that cannot be read is an error.
func Load(paths []string, format Format, model string) ([]Session, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var inDir []string
		for _, pat := range []string{"*.json", "*.jsonl"} {
			m, _ := filepath.Glob(filepath.Join(p, pat))
			inDir = append(inDir, m...)
		}
		if len(inDir) == 0 {
			return nil, fmt.Errorf("%s: no *.json or *.jsonl files", p)
		}
		sort.Strings(inDir)
		files = append(files, inDir...)
	}
	sessions := make([]Session, 0, len(files))
	for _, f := range files {
		s, err := LoadFile(f, format, model)
		s.Err = err
		sessions = append(sessions, s)
	}
	return sessions, nil
}

// LoadFile reads one session file (see Load).
func LoadFile(path string, format Format, model string) (Session, error) {
	s := Session{Name: filepath.Base(path)}
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	var bodies [][]byte
	if strings.HasSuffix(path, ".jsonl") {
		bodies, err = splitLines(data)
	} else {
		bodies = [][]byte{bytes.TrimSpace(data)}
	}
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if s.Format = format; s.Format == "" {
		s.Format = detect(bodies)
	}
	if !strings.HasSuffix(path, ".jsonl") {
		if bodies, err = Turns(s.Format, bodies[0]); err != nil {
			return s, fmt.Errorf("%s: %w", path, err)
		}
	}
	for i, b := range bodies {
		if bodies[i], err = sjson.SetBytes(b, "model", model); err != nil {
			return s, fmt.Errorf("%s: request %d: setting the model: %w", path, i+1, err)
		}
	}
	s.Requests = bodies
	return s, nil
}

// splitLines returns the non-blank lines of a JSONL file, each a JSON
// object.
func splitLines(data []byte) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 256<<20) // a line is a whole request body
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !jsonvalid.Valid(line) || !gjson.ParseBytes(line).IsObject() {
			return nil, fmt.Errorf("line %d: not a JSON object", n)
		}
		out = append(out, bytes.Clone(line))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no requests")
	}
	return out, nil
}

// detect tells a file's format from its first request whose shape says
// it: `input` and no `messages` is Responses; a top-level `system`, a
// content block only Anthropic has, or max_tokens without any chat-only
// role or member is Messages; otherwise chat.
func detect(bodies [][]byte) Format {
	for _, b := range bodies {
		if f, sure := shapeOf(b); sure {
			return f
		}
	}
	return Chat
}

// shapeOf is one body's format, and whether its shape decides it.
func shapeOf(body []byte) (Format, bool) {
	top := gjson.ParseBytes(body)
	msgs := top.Get("messages")
	if !msgs.Exists() {
		return Responses, top.Get("input").Exists()
	}
	if top.Get("system").Exists() {
		return Messages, true
	}
	chatOnly, anthropic := false, false
	msgs.ForEach(func(_, m gjson.Result) bool {
		switch m.Get("role").String() {
		case "tool", "developer", "function":
			chatOnly = true
		}
		if m.Get("tool_calls").Exists() || m.Get("tool_call_id").Exists() {
			chatOnly = true
		}
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			switch b.Get("type").String() {
			case "tool_use", "tool_result", "thinking", "redacted_thinking":
				anthropic = true
			}
			return true
		})
		return true
	})
	switch {
	case anthropic:
		return Messages, true
	case chatOnly:
		return Chat, true
	}
	return Chat, false
}

// Turns returns the requests a client sent during the run that body holds
// whole (the last request of a run, as in the corpus): request k has the
// history cut just before the k-th assistant message (Responses: the k-th
// run of output items, one answer's), and at least up to the first user
// message; the whole body comes last. Every byte
// outside the history array is as in body.
func Turns(f Format, body []byte) ([][]byte, error) {
	if !jsonvalid.Valid(body) {
		return nil, errors.New("not valid JSON")
	}
	key := "messages"
	if f == Responses {
		key = "input"
	}
	arr := gjson.GetBytes(body, key)
	if !arr.IsArray() {
		return [][]byte{body}, nil // nothing to cut (a Responses string input)
	}
	var ends []int // ends[i]: the byte after element i
	var model []bool
	firstUser := -1
	arr.ForEach(func(_, e gjson.Result) bool {
		i := len(ends)
		ends = append(ends, e.Index+len(e.Raw)) // gjson: Index is the body offset
		model = append(model, isModelOutput(f, e))
		if firstUser < 0 && e.Get("role").String() == "user" && !isModelOutput(f, e) {
			firstUser = i
		}
		return true
	})
	closing := arr.Index + len(arr.Raw) - 1 // the array's ']'
	var out [][]byte
	last := -1
	for i := range ends {
		// One Responses answer is several output items in a row.
		if !model[i] || (f == Responses && i > 0 && model[i-1]) {
			continue
		}
		cut := max(i, firstUser+1) // messages [0, cut) are sent
		if cut <= last || cut >= len(ends) || cut == 0 {
			continue
		}
		req := make([]byte, 0, ends[cut-1]+len(body)-closing)
		req = append(req, body[:ends[cut-1]]...)
		req = append(req, body[closing:]...)
		out = append(out, req)
		last = cut
	}
	return append(out, body), nil
}

// isModelOutput reports whether a history element is the model's: an
// assistant message, or a Responses output item (reasoning, a call).
func isModelOutput(f Format, e gjson.Result) bool {
	if e.Get("role").String() == "assistant" {
		return true
	}
	if f != Responses {
		return false
	}
	typ := e.Get("type").String()
	return typ == "reasoning" || (strings.HasSuffix(typ, "_call") && !strings.HasSuffix(typ, "_output"))
}
