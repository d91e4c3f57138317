package rewrite

import "github.com/ctxpress/ctxpress/squash"

// corpusSquash is the squasher the corpus tests run with, and
// corpusSquashName says which one it is in their logs: ctxpress's real
// compressor with its defaults (1500-byte floor, read-type tools exempt,
// shell reads kept). The unit tests of the plumbing use truncSquash
// instead.
var (
	corpusSquash     Squasher = squash.New(squash.Config{})
	corpusSquashName          = "squash.ApplyCall (defaults)"
)
