package rewrite

import "crypto/sha256"

// callKey identifies a tool call for dedup: the tool name and the sha256 of
// its canonical arguments.
type callKey struct {
	tool string
	args [sha256.Size]byte
}

// newCallKey returns the dedup key of a call to tool with canonical
// arguments args.
func newCallKey(tool string, args []byte) callKey {
	return callKey{tool: tool, args: sha256.Sum256(args)}
}
