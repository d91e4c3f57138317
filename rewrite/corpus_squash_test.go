package rewrite

import "github.com/ctxpress/ctxpress/squash"

// corpusSquash is the squasher the corpus tests run with, and
// corpusSquashName says which one it is in their logs: ctxpress's real
// compressor with its defaults (1500-byte floor, read-type tools exempt).
// The unit tests of the plumbing use truncSquash instead.
var (
	corpusSquash     = squash.Apply
	corpusSquashName = "squash.Apply (defaults)"
)
