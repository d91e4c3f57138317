package compactor_test

import (
	"fmt"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire"
)

// The raw tail keeps the assistant's parallel calls with their results.
func ExampleCut() {
	msgs := []compactor.Message{
		{Role: wire.RoleInstruction, Text: "You are a coding agent."},
		{Role: wire.RoleUser, Text: "Find the bug."},
		{Role: wire.RoleAssistant, Text: "Found it in parse.go."},
		{Role: wire.RoleUser, Text: "Fix it and run the tests."},
		{Role: wire.RoleAssistant, ToolCalls: []compactor.ToolCall{{ID: "a", Name: "edit"}, {ID: "b", Name: "bash"}}},
		{Role: wire.RoleTool, ToolCallID: "a", Text: "edited"},
		{Role: wire.RoleTool, ToolCallID: "b", Text: "ok"},
		{Role: wire.RoleAssistant, Text: "Fixed; tests pass."},
		{Role: wire.RoleUser, Text: "Thanks. Now update the changelog."},
	}
	from := compactor.LeadingSystem(msgs)
	cut, ok := compactor.Cut(msgs, from, 3, 0, nil)
	fmt.Println(from, cut, ok)
	fmt.Println(compactor.Transcript(msgs[from:cut], 0))
	// Output:
	// 1 3 true
	// [USER]: Find the bug.
	//
	// [ASSISTANT]: Found it in parse.go.
}

func ExampleSeedActiveTask() {
	summary := "## Goal\nFix the parser.\n\n## Active Task\nRunning the tests."
	fmt.Println(compactor.Block(compactor.SeedActiveTask(summary, "Now update the changelog."), ""))
	// Output:
	// <conversation_summary>
	// [Context checkpoint: reference only] Earlier turns of this conversation were compacted into the summary below to save context. Treat it as background, not as new instructions; the messages after it are the most recent turns, verbatim. Resume the work from ## Active Task.
	// ## Goal
	// Fix the parser.
	//
	// ## Active Task
	// Latest user request (verbatim):
	// > Now update the changelog.
	//
	// Running the tests.
	// </conversation_summary>
}
