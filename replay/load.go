package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Session is one recorded session: its requests in the order the client
// sent them.
type Session struct {
	// Name tells it apart in the report: the file's path under the
	// directory it was found in (its base name when named itself), and
	// for a sidechain of a Claude Code transcript what tells it from the
	// file's main conversation. It is also the session's X-Session-ID.
	Name   string
	Format Format
	// Requests are its request bodies. A session Load found has them
	// once Read reads them, so a whole tree is not held at once.
	Requests [][]byte
	// Turns is how many requests it has.
	Turns int
	// Agent is the client whose transcript it was read from: "claude-code",
	// "codex", or "" for request bodies, replayed as they are.
	Agent string
	// Model is the model most of its requests name.
	Model string
	// Approximated says what of its requests the transcript did not
	// record and the reader filled in; "" when nothing was.
	Approximated string
	// Err is why the file could not be read as a session; Run reports it
	// as failed and goes on with the others.
	Err error

	read func() ([][]byte, error) // reads Requests again
}

// Read returns s with its requests, reading them when Load left them out.
func (s Session) Read() (Session, error) {
	if s.Err != nil || s.Requests != nil || s.read == nil {
		return s, s.Err
	}
	reqs, err := s.read()
	if err == nil && len(reqs) != s.Turns {
		err = fmt.Errorf("read %d requests, %d the first time", len(reqs), s.Turns)
	}
	s.Requests = reqs
	return s, err
}

// LoadOptions say how files are read as sessions.
type LoadOptions struct {
	// Format is request bodies' format; "" tells each file's by its shape.
	// A transcript's is its agent's.
	Format Format
	// Model, when set, is the model every request names.
	Model string
	// BodyModel is what request bodies name when Model is "" (a recorded
	// body's model is often a placeholder); a transcript keeps the models
	// its agent used.
	BodyModel string
}

// Skipped is a file Load passed over in a directory, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Found is what Load found.
type Found struct {
	Sessions []Session
	// Skipped are the files of the directories that hold no session.
	Skipped []Skipped
}

// errNotSession: the file is neither request bodies nor a transcript.
var errNotSession = errors.New("not a session: neither request bodies nor a Claude Code or codex transcript")

// Load finds the sessions in paths. A file is one session (a .jsonl file
// of request bodies, one a line; a codex rollout; any other request body,
// a whole run replayed turn by turn) or several (a Claude Code transcript:
// its main conversation and each sidechain), told by content, not name.
// A directory is every *.json and *.jsonl under it, recursively; there a
// file of JSON that holds no session, or a session in which no model was
// called, is Skipped, while one that cannot be read (not JSON, cut short)
// is a session with its Err, as is a file named itself that is no
// session. Only a path that does not exist is an error, or finding no
// session at all.
func Load(paths []string, o LoadOptions) (Found, error) {
	var found Found
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return found, err
		}
		if !st.IsDir() {
			found.Sessions = append(found.Sessions, o.sessionsOf(p, filepath.Base(p), true, &found)...)
			continue
		}
		files, err := sessionFiles(p, &found)
		if err != nil {
			return found, err
		}
		for _, f := range files {
			rel, _ := filepath.Rel(p, f)
			found.Sessions = append(found.Sessions, o.sessionsOf(f, filepath.ToSlash(rel), false, &found)...)
		}
	}
	if len(found.Sessions) == 0 {
		return found, fmt.Errorf("no sessions in %s", strings.Join(paths, ", "))
	}
	return found, nil
}

// sessionFiles are the *.json and *.jsonl files under dir, by path; a
// directory that cannot be read is skipped.
func sessionFiles(dir string, found *Found) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			found.Skipped = append(found.Skipped, Skipped{Path: path, Reason: err.Error()})
			return nil
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".json")) {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// sessionsOf reads the file at path as sessions named name, and keeps
// what the report needs of them, not their requests. named: the path was
// named itself.
func (o LoadOptions) sessionsOf(path, name string, named bool, found *Found) []Session {
	sessions, err := o.readFile(path, name)
	switch {
	case err == nil:
	case !named && (errors.Is(err, errNotSession) || errors.Is(err, errNoModelCalls)):
		found.Skipped = append(found.Skipped, Skipped{Path: path, Reason: err.Error()})
		return nil
	default:
		return []Session{{Name: name, Err: fmt.Errorf("%s: %w", path, err)}}
	}
	for i := range sessions {
		sessions[i].Turns = len(sessions[i].Requests)
		sessions[i].Requests = nil
		sessions[i].read = func() ([][]byte, error) {
			again, err := o.readFile(path, name)
			if err != nil {
				return nil, err
			}
			if i >= len(again) {
				return nil, errors.New("the file changed since it was found")
			}
			return again[i].Requests, nil
		}
	}
	return sessions
}

// ReadFile reads the sessions of one file, as Load does, with their
// requests; name is the first session's Name.
func ReadFile(path, name string, o LoadOptions) ([]Session, error) {
	return o.readFile(path, name)
}

func (o LoadOptions) readFile(path, name string) ([]Session, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sessions []Session
	switch detectKind(data) {
	case KindClaudeCode:
		convs, err := claudeCodeConversations(data)
		if err != nil {
			return nil, err
		}
		for _, c := range convs {
			sessions = append(sessions, c.session(name, Messages, "claude-code"))
		}
	case KindCodex:
		c, err := codexConversation(data)
		if err != nil {
			return nil, err
		}
		sessions = append(sessions, c.session(name, Responses, "codex"))
	case KindBodies:
		s, err := o.bodies(path, name, data)
		if err != nil {
			return nil, err
		}
		return []Session{s}, nil
	default:
		// JSON that is no session is passed over; a file cut short or
		// garbled, which may have been one, is not.
		if whole := bytes.TrimSpace(data); len(whole) > 0 && !jsonvalid.Valid(whole) {
			if _, err := splitLines(data); err != nil {
				return nil, err
			}
		}
		return nil, errNotSession
	}
	if len(sessions) == 0 {
		return nil, errNoModelCalls
	}
	if o.Model != "" {
		for i := range sessions {
			if err := setModel(sessions[i].Requests, o.Model); err != nil {
				return nil, err
			}
			sessions[i].Model = o.Model
		}
	}
	return sessions, nil
}

// session is c as a session of the file named name.
func (c conversation) session(name string, f Format, agent string) Session {
	return Session{Name: name + c.suffix, Format: f, Requests: c.requests, Turns: len(c.requests),
		Agent: agent, Model: c.model, Approximated: c.approximated}
}

// bodies reads a file of request bodies: a .jsonl file holds its
// requests, one a line; any other file one body holding a whole run,
// replayed turn by turn (Turns).
func (o LoadOptions) bodies(path, name string, data []byte) (Session, error) {
	s := Session{Name: name}
	jsonl := strings.HasSuffix(path, ".jsonl")
	var bodies [][]byte
	var err error
	if jsonl {
		bodies, err = splitLines(data)
	} else {
		bodies = [][]byte{bytes.TrimSpace(data)}
	}
	if err != nil {
		return s, err
	}
	if s.Format = o.Format; s.Format == "" {
		s.Format = detect(bodies)
	}
	if !jsonl {
		if bodies, err = Turns(s.Format, bodies[0]); err != nil {
			return s, err
		}
	}
	s.Model = o.Model
	if s.Model == "" {
		s.Model = o.BodyModel
	}
	if s.Model != "" {
		if err := setModel(bodies, s.Model); err != nil {
			return s, err
		}
	}
	s.Requests, s.Turns = bodies, len(bodies)
	return s, nil
}

// setModel makes every body name model.
func setModel(bodies [][]byte, model string) error {
	for i, b := range bodies {
		var err error
		if bodies[i], err = sjson.SetBytes(b, "model", model); err != nil {
			return fmt.Errorf("request %d: setting the model: %w", i+1, err)
		}
	}
	return nil
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

// Source is where an agent keeps its sessions.
type Source struct {
	Agent string // "claude-code" or "codex"
	Dir   string
}

// DefaultSources are where Claude Code and codex keep their sessions for
// a user whose home is home: $CLAUDE_CONFIG_DIR/projects (claudeConfig,
// "" for ~/.claude), and $CODEX_HOME/sessions (codexHome, "" for
// ~/.codex).
func DefaultSources(home, claudeConfig, codexHome string) []Source {
	if claudeConfig == "" {
		claudeConfig = filepath.Join(home, ".claude")
	}
	if codexHome == "" {
		codexHome = filepath.Join(home, ".codex")
	}
	return []Source{{Agent: "claude-code", Dir: filepath.Join(claudeConfig, "projects")},
		{Agent: "codex", Dir: filepath.Join(codexHome, "sessions")}}
}
