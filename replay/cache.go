package replay

import "crypto/sha256"

// MinCachedPrefix is the shortest prefix a provider caches, in tokens
// (OpenAI's minimum; Anthropic's is 1024 for most models too).
const MinCachedPrefix = 1024

// prefixCache is one session's prompt cache at the provider: every prefix
// of every prompt it was sent, by the chain hash of its elements. It is not
// safe for concurrent use.
type prefixCache struct {
	seen map[[sha256.Size]byte]struct{}
}

func newPrefixCache() *prefixCache {
	return &prefixCache{seen: map[[sha256.Size]byte]struct{}{}}
}

// serve returns the cached tokens of a request made of elems: the tokens
// of the longest prefix of elements it shares with an earlier request,
// when that prefix holds at least MinCachedPrefix tokens, else 0. It then
// remembers elems' prefixes for the requests after it.
func (c *prefixCache) serve(elems []element) int {
	var chain [sha256.Size]byte
	shared, sharedTokens, tokens := true, 0, 0
	for _, e := range elems {
		h := sha256.New()
		h.Write(chain[:])
		h.Write(e.key[:])
		h.Sum(chain[:0])
		tokens += e.tokens
		if _, ok := c.seen[chain]; ok && shared {
			sharedTokens = tokens
		} else {
			shared = false
			c.seen[chain] = struct{}{}
		}
	}
	if sharedTokens < MinCachedPrefix {
		return 0
	}
	return sharedTokens
}
