package wire

// Usage is what the upstream reported about one answer, whatever its
// format: each adapter reads its own fields into it.
type Usage struct {
	// InputTokens is the prompt's size as the upstream counts it, cached
	// tokens included (chat's prompt_tokens, Responses' input_tokens,
	// Anthropic's input + cache read + cache write).
	InputTokens  int
	OutputTokens int
	CachedTokens int
	// CacheWriteTokens are the input tokens the provider wrote to its
	// prompt cache (Anthropic's cache_creation_input_tokens), billed above
	// the input price; 0 for formats that do not report them.
	CacheWriteTokens int
	// Found reports whether the answer carried usage at all.
	Found bool
	// ServerCompacted reports whether the upstream compacted the request
	// itself before answering it (Anthropic's usage.iterations with a
	// "compaction" entry). The fields above then count only the context
	// the model saw after that compaction, not the request forwarded.
	ServerCompacted bool
	// ServerCompaction is what that compaction used, billed on top of the
	// fields above; zero when the upstream did not compact.
	ServerCompaction Tokens
	// Hidden is what ctxpress's own rounds inside the answer used: the
	// requests it asked again after answering a call of its own tool
	// (expand.ToolName) itself, and the answers that made those calls.
	// It is billed on top of the fields above, which then count the
	// request as forwarded and the answer the client got; zero when
	// there was none.
	Hidden Tokens
}

// Tokens are the token counts of one part of an answer, counted as Usage
// counts them: InputTokens is every prompt token, CachedTokens and
// CacheWriteTokens the parts of it read from and written to the cache.
type Tokens struct {
	InputTokens, OutputTokens, CachedTokens, CacheWriteTokens int
}

// Reply is an answer ctxpress writes itself (to "/compact"), in the
// format of the request it answers.
type Reply struct {
	ContentType string
	Body        []byte
}
