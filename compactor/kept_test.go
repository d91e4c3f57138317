package compactor

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/wire"
)

func TestKeptTranscript(t *testing.T) {
	long := strings.Repeat("FAIL TestParse/case_", 2000) + "end of the log"
	msgs := []Message{
		{Role: wire.RoleUser, Text: "run the tests"},
		{Role: wire.RoleAssistant, Text: "Running them.", ToolCalls: []ToolCall{
			{ID: "call_1", Name: "bash", Arguments: `{"command":"go test ./..."}`},
			{ID: "call_2", Name: "read_file", Arguments: `{"path":"a.go"}`},
		}},
		{Role: wire.RoleTool, ToolCallID: "call_1", Text: long},
		{Role: wire.RoleTool, ToolCallID: "call_2", Text: "package a\n\nfunc A() {}"},
		{Role: wire.RoleUser, Text: "/compact", Omit: true},
		{Role: wire.RoleTool, Name: "legacy_fn", Text: "42"},
		{Role: wire.RoleUser, Text: "my key is " + fakeOpenAI},
	}
	got, n := KeptTranscript(msgs, 3)
	want := strings.Join([]string{
		"=== message 3 [USER] ===\nrun the tests\n",
		"=== message 4 [ASSISTANT] ===\nRunning them.\n[Tool call bash (call_1)]: {\"command\":\"go test ./...\"}\n[Tool call read_file (call_2)]: {\"path\":\"a.go\"}\n",
		"=== message 5 [TOOL RESULT call_1 bash] ===\n" + long + "\n",
		"=== message 6 [TOOL RESULT call_2 read_file] ===\npackage a\n\nfunc A() {}\n",
		"=== message 8 [TOOL RESULT legacy_fn] ===\n42\n",
		"=== message 9 [USER] ===\nmy key is [REDACTED]\n",
	}, "\n")
	if n != 6 {
		t.Errorf("n = %d, want 6 (the /compact command is no message of the conversation)", n)
	}
	if strings.Contains(got, fakeOpenAI) {
		t.Fatal("a secret is kept")
	}
	if got != want {
		t.Errorf("KeptTranscript =\n%s\nwant\n%s", got, want)
	}

	// Each message is the lines from its header to the next one's: what
	// sed -n prints of that range is the message, whole.
	var starts []int
	for i, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "=== message ") {
			starts = append(starts, i+1)
		}
	}
	starts = append(starts, expand.CountLines(got)+2)
	for k := range len(starts) - 1 {
		part := expand.Slice(got, expand.Lines{From: starts[k], To: starts[k+1] - 1})
		if !strings.HasPrefix(part, "=== message ") || strings.Count(part, "=== message ") != 1 {
			t.Errorf("lines %d-%d are not one whole message: %.80q", starts[k], starts[k+1]-1, part)
		}
	}
	if !strings.Contains(expand.Slice(got, expand.Lines{From: starts[2], To: starts[3] - 1}), "end of the log") {
		t.Error("a long tool result is cut: the kept transcript keeps it whole")
	}
}

func TestKeptNote(t *testing.T) {
	back := expand.Ways{Dir: "/tmp/x"}.Back("3f9a2c1b4d5e", expand.Lines{From: 1, To: 30})
	for n, want := range map[int]string{
		40: "The 40 earlier messages this summary replaces are kept in full, one header line per message; original intact: sed -n '1,30p' /tmp/x/3f9a2c1b4d5e.txt",
		1:  "The earlier message this summary replaces is kept in full, one header line per message; original intact: sed -n '1,30p' /tmp/x/3f9a2c1b4d5e.txt",
	} {
		if got := KeptNote(n, back); got != want {
			t.Errorf("KeptNote(%d) = %q, want %q", n, got, want)
		}
	}
}

// A summariser shown a block copies its line on kept messages into the
// new summary at times: Finish leaves it out, since the new block has its
// own.
func TestFinishDropsCopiedKeptNote(t *testing.T) {
	note := KeptNote(12, expand.Ways{}.Back("3f9a2c1b4d5e", expand.Lines{}))
	got := Finish("## Goal\nShip.\n"+note+"\n## Active Task\nTesting.", "")
	if strings.Contains(got, "3f9a2c1b4d5e") || got != "## Goal\nShip.\n## Active Task\nTesting." {
		t.Errorf("Finish kept the copied line: %q", got)
	}
	if s := "## Goal\nkeep " + strconv.Itoa(12) + " messages"; Finish(s, "") != s {
		t.Errorf("Finish changed a summary without a kept line")
	}
}
