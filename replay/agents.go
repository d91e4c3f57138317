package replay

import (
	_ "embed"

	"github.com/tidwall/gjson"
)

// What a transcript leaves out of the requests its agent sent is filled in
// from these profiles: the system prompt, tools and parameters one real
// client sent, recorded from its requests (agents/README.md says how).

//go:embed agents/claude-code.json
var claudeCodeProfileJSON []byte

//go:embed agents/codex.json
var codexProfileJSON []byte

// claudeCodeProfile is Claude Code's: its system blocks, tools and the
// request parameters it sets.
var claudeCodeProfile = struct {
	version, system, tools string // system and tools: raw JSON arrays
	params                 gjson.Result
}{
	version: gjson.GetBytes(claudeCodeProfileJSON, "version").String(),
	system:  gjson.GetBytes(claudeCodeProfileJSON, "system").Raw,
	tools:   gjson.GetBytes(claudeCodeProfileJSON, "tools").Raw,
	params:  gjson.GetBytes(claudeCodeProfileJSON, "params"),
}

// codexProfile is codex's: its base instructions, tools and the prompt of
// its own compaction call.
var codexProfile = struct {
	version, model, instructions, tools, compactionPrompt string // tools: a raw JSON array
}{
	version:          gjson.GetBytes(codexProfileJSON, "version").String(),
	model:            gjson.GetBytes(codexProfileJSON, "model").String(),
	instructions:     gjson.GetBytes(codexProfileJSON, "instructions").String(),
	tools:            gjson.GetBytes(codexProfileJSON, "tools").Raw,
	compactionPrompt: gjson.GetBytes(codexProfileJSON, "compaction_prompt").String(),
}
