package compactor

import "unicode/utf8"

// Safety margins for TranscriptBudget. The chars-per-token ratio is
// measured on the whole transcript, but the cap keeps only its start and
// end, which may be denser (code, JSON, non-English text); and the chat
// template adds a few tokens around the one message.
const (
	budgetSafety  = 0.9 // use 90% of the chars the ratio allows
	budgetReserve = 64  // tokens for the chat template around the prompt
)

// defaultMaxTokens is the summary's max_tokens when the trigger is unknown,
// and its ceiling otherwise: enough for a dense 13-section summary.
const defaultMaxTokens = 4000

// DefaultMaxTokens returns the summary's max_tokens budget: min(4000, 25% of
// trigger), so a summary never eats more than a quarter of the context it
// frees. trigger <= 0 (unknown) gives 4000.
func DefaultMaxTokens(trigger int) int {
	if trigger <= 0 {
		return defaultMaxTokens
	}
	return max(min(defaultMaxTokens, trigger/4), 1)
}

// TranscriptBudget returns how many chars of transcript (Transcript's
// maxChars) fit the summary model's window next to the prompt around it
// and the maxTokens of answer: (window - maxTokens - tokens of
// BuildPromptFor(window, prev, "") - 64) tokens, converted to chars with the ratio
// countTokens measures on Transcript(msgs, 0) (its start and end when long), of which 90% is used (see
// budgetSafety). countTokens nil counts 4 chars per token. The result is
// <= 0 when nothing fits, and may exceed the transcript's length when all
// of it fits. Without msgTokens it renders the transcript once to measure it; the caller
// renders it again with the budget.
//
// msgTokens > 0 says msgs hold about that many tokens (the caller's cached
// counts of the texts as forwarded, with their per-message framing): the
// ratio is then taken from it, and the transcript is neither rendered nor
// tokenised.
func TranscriptBudget(window, maxTokens int, countTokens func(string) int, prev string, msgs []Message, msgTokens int) int {
	if countTokens == nil {
		countTokens = func(s string) int { return (len(s) + 3) / 4 }
	}
	room := window - maxTokens - countTokens(BuildPromptFor(window, prev, "")) - budgetReserve
	if room <= 0 {
		return 0
	}
	charsPerToken := 4.0 // when there is no text to measure
	if msgTokens > 0 {
		// The counts are of the texts whole (the transcript truncates long
		// ones), so the ratio is of the texts too; nothing is rendered.
		chars := 0
		for i := range msgs {
			chars += len(msgs[i].Text)
			for _, c := range msgs[i].ToolCalls {
				chars += len(c.Name) + len(c.Arguments)
			}
		}
		if chars > 0 {
			charsPerToken = float64(chars) / float64(msgTokens)
		}
	} else if sample := ratioSample(Transcript(msgs, 0)); len(sample) > 0 {
		if n := countTokens(sample); n > 0 {
			charsPerToken = float64(len(sample)) / float64(n)
		}
	}
	return int(float64(room) * charsPerToken * budgetSafety)
}

// ratioSampleChars bounds the text tokenised to measure a transcript's
// chars per token: a long transcript is measured on its first and last
// ratioSampleChars/2, the parts the cap keeps. Tokenising all of it cost
// more CPU than the rest of a compaction together.
const ratioSampleChars = 32 << 10

// ratioSample returns t, or when it is longer than ratioSampleChars its
// start and end joined, cut on rune boundaries.
func ratioSample(t string) string {
	if len(t) <= ratioSampleChars {
		return t
	}
	half := ratioSampleChars / 2
	head, tail := half, len(t)-half
	for head > 0 && !utf8.RuneStart(t[head]) {
		head--
	}
	for tail < len(t) && !utf8.RuneStart(t[tail]) {
		tail++
	}
	return t[:head] + t[tail:]
}
