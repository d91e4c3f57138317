package jsonvalid

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// Realistic chat-completions bodies for tests and benchmarks. Most bytes
// sit inside long strings full of escapes: source code (tabs, quotes,
// backslashes), logs (newlines, timestamps), JSON tool arguments (nested
// \" escapes), HTML (escaped as \u003c by encoding/json) and non-ASCII text.

const goSource = `package server

import (
	"fmt"
	"net/http"
	"strings"
)

// handle serves "/v1/items/{id}" and writes a JSON reply.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/items/")
	if id == "" {
		http.Error(w, "missing id", http.StatusBadRequest)
		return
	}
	item, err := s.store.Get(r.Context(), id)
	if err != nil {
		s.log.Printf("get %q: %v\n", id, err)
		http.Error(w, fmt.Sprintf("lookup failed: %s", err), 500)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fmt.Fprintf(w, "{\"id\":%q,\"name\":%q,\"path\":\"C:\\\\data\\\\%s\"}\n", item.ID, item.Name, id)
}
`

const pySource = `def parse(line: str) -> dict:
    """Split 'key=value' pairs; values may be "quoted" or contain \\t tabs."""
    out = {}
    for part in line.split(";"):
        if "=" not in part:
            continue
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip().strip('"')
    return out  # e.g. {'a': '1', 'b': 'x y'}
`

var logLevels = []string{"DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"}

var unicodeSnippets = []string{
	"Grüße aus Köln — naïve café façade",
	"日本語のテキストと漢字の混在した文章です。",
	"Привет, мир! Это тестовая строка.",
	"emoji: 🚀🔥✅ and flags 🇩🇪🇯🇵",
	"math: ∀x ∈ ℝ, x² ≥ 0; π ≈ 3.14159",
	"RTL: שלום עולם / مرحبا بالعالم",
}

func logText(r *rand.Rand, lines int) string {
	var sb strings.Builder
	for i := range lines {
		lvl := logLevels[r.IntN(len(logLevels))]
		fmt.Fprintf(&sb, "2025-06-%02dT%02d:%02d:%02d.%03dZ %-5s [worker-%d] request_id=%08x path=\"/api/v%d/items\" took=%dms",
			1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000), lvl, r.IntN(16), r.Uint32(), 1+r.IntN(3), r.IntN(900))
		if lvl == "ERROR" {
			sb.WriteString(" error=\"context deadline exceeded\"\n\tat main.run (main.go:42)\n\tat main.main (main.go:17)")
		}
		if i%7 == 3 {
			sb.WriteString(" msg=" + unicodeSnippets[r.IntN(len(unicodeSnippets))])
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func codeText(r *rand.Rand, copies int) string {
	var sb strings.Builder
	for i := range copies {
		if r.IntN(2) == 0 {
			sb.WriteString(goSource)
		} else {
			sb.WriteString(pySource)
		}
		fmt.Fprintf(&sb, "// chunk %d <see docs & notes>\n", i)
	}
	return sb.String()
}

func proseText(r *rand.Rand, sentences int) string {
	words := strings.Fields("the proxy compacts older tool output while keeping the most recent turns intact so that the model still sees what it needs and the request stays under the context window limit")
	var sb strings.Builder
	for i := range sentences {
		n := 6 + r.IntN(14)
		for j := range n {
			if j > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[r.IntN(len(words))])
		}
		switch i % 5 {
		case 1:
			sb.WriteString(` ("quoted", with a \backslash)`)
		case 3:
			sb.WriteString(" " + unicodeSnippets[r.IntN(len(unicodeSnippets))])
		}
		sb.WriteString(".\n")
	}
	return sb.String()
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatBody builds a chat-completions request of at least minSize bytes.
func chatBody(seed uint64, minSize int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	tools := []any{}
	for _, name := range []string{"read_file", "run_shell", "search_code", "write_file"} {
		tools = append(tools, map[string]any{
			"type": "function",
			"function": map[string]any{
				"name":        name,
				"description": "Tool " + name + ": returns \"stdout\" and exit code.",
				"parameters": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"path":    map[string]any{"type": "string", "description": "file path"},
						"timeout": map[string]any{"type": "number", "minimum": 0, "maximum": 3.6e3, "default": -1.5e-3},
						"flags":   map[string]any{"type": "array", "items": map[string]any{"type": "boolean"}},
					},
					"required":             []string{"path"},
					"additionalProperties": false,
				},
			},
		})
	}
	msgs := []chatMessage{{Role: "system", Content: proseText(r, 40)}}
	size := 0
	for turn := 0; size < minSize; turn++ {
		msgs = append(msgs, chatMessage{Role: "user", Content: proseText(r, 3+r.IntN(10))})
		if turn%3 == 2 {
			msgs = append(msgs, chatMessage{Role: "user", Content: []any{
				map[string]any{"type": "text", "text": proseText(r, 2)},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/img.png?a=1&b=2", "detail": nil}},
			}})
		}
		var call chatToolCall
		call.ID = fmt.Sprintf("call_%016x", r.Uint64())
		call.Type = "function"
		call.Function.Name = "write_file"
		args, _ := json.Marshal(map[string]any{"path": fmt.Sprintf("src/pkg%d/file.go", turn), "content": codeText(r, 1), "timeout": 30, "flags": []bool{true, false}})
		call.Function.Arguments = string(args) // doubly escaped JSON
		msgs = append(msgs, chatMessage{Role: "assistant", Content: nil, ToolCalls: []chatToolCall{call}})
		var out string
		switch turn % 3 {
		case 0:
			out = codeText(r, 2+r.IntN(4))
		case 1:
			out = logText(r, 20+r.IntN(60))
		default:
			out = "<html><body><p class=\"x\">" + proseText(r, 8) + "</p></body></html>"
		}
		msgs = append(msgs, chatMessage{Role: "tool", Content: out, ToolCallID: call.ID})
		msgs = append(msgs, chatMessage{Role: "assistant", Content: proseText(r, 2+r.IntN(6))})
		size += len(out) + len(args) + 600
	}
	body, err := json.Marshal(map[string]any{
		"model":       "gpt-4o-2024-08-06",
		"messages":    msgs,
		"tools":       tools,
		"temperature": 0.2,
		"top_p":       1,
		"max_tokens":  4096,
		"stream":      true,
		"stop":        nil,
		"user":        "user-1234",
	})
	if err != nil {
		panic(err)
	}
	return body
}

// prettyBody is body re-indented, as some clients send it.
func prettyBody(body []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "    "); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// asciiBody escapes every non-ASCII rune as \uXXXX (surrogate pairs above
// the BMP), like Python's json.dumps(ensure_ascii=True). Non-ASCII bytes
// only occur inside strings, so this keeps the body valid.
func asciiBody(body []byte) []byte {
	out := make([]byte, 0, len(body)+len(body)/8)
	for len(body) > 0 {
		c, n := utf8.DecodeRune(body)
		switch {
		case c < utf8.RuneSelf:
			out = append(out, body[0])
		case c > 0xFFFF:
			c -= 0x10000
			out = fmt.Appendf(out, `\u%04x\u%04X`, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		default:
			out = fmt.Appendf(out, `\u%04x`, c)
		}
		body = body[n:]
	}
	return out
}

// smallChatBody is a complete chat request of a few KB with the same kinds
// of content as chatBody. It is used where every byte position is tested
// and as a fuzz seed.
func smallChatBody(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0xc0de))
	args, _ := json.Marshal(map[string]any{"cmd": "grep -rn \"TODO\" ./src | head -n 5", "timeout": 1.5e1})
	body, err := json.Marshal(map[string]any{
		"model": "gpt-4o-mini",
		"messages": []chatMessage{
			{Role: "system", Content: proseText(r, 2)},
			{Role: "user", Content: []any{map[string]any{"type": "text", "text": unicodeSnippets[r.IntN(len(unicodeSnippets))]}}},
			{Role: "assistant", Content: nil, ToolCalls: []chatToolCall{{ID: "call_1", Type: "function", Function: struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			}{"run_shell", string(args)}}}},
			{Role: "tool", ToolCallID: "call_1", Content: logText(r, 3) + pySource[:200]},
		},
		"temperature": 0,
		"stream":      false,
		"n":           -1,
		"stop":        []any{"\n\n", nil, true},
	})
	if err != nil {
		panic(err)
	}
	return body
}
