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
}

// Reply is an answer ctxpress writes itself (to "/compact"), in the
// format of the request it answers.
type Reply struct {
	ContentType string
	Body        []byte
}
