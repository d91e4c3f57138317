package compactor

import (
	"errors"
	"fmt"
	"math"

	"github.com/ctxpress/ctxpress/redact"
)

// ErrNoRoom means the summariser's window has no room for a transcript
// beside the prompt and the summary's cap.
var ErrNoRoom = errors.New("no room for a transcript")

// SummaryInput is what one summary call is made from.
type SummaryInput struct {
	Messages    []Message // the messages to summarise, in order
	PrevSummary string    // the summary being updated; "" for a first one
	Window      int       // the summariser's context window, in its tokens
	MaxTokens   int       // the summary's cap, in the summariser's tokens
	// Count counts a text's tokens (tiktoken for the summariser's model).
	Count func(string) int
	// MessageTokens is what Messages hold in Count's tokens (the caller's
	// cached counts); 0 has TranscriptBudget measure the transcript.
	MessageTokens int
	// Scale is the summariser's tokens per Count token (>= 1): where the
	// summariser is the conversation's own model, its calibration says how
	// far off Count is (a small local model can count 2x more). 0 means 1.
	Scale float64
}

// Summary is the prompt of one summary call, its transcript sized to the
// summariser's window.
type Summary struct {
	msgs   []Message
	prev   string
	window int
	budget int // chars of transcript
}

// NewSummary sizes the transcript of in.Messages to the summariser's
// window (TranscriptBudget, in the summariser's tokens); the error wraps
// ErrNoRoom when nothing fits.
func NewSummary(in SummaryInput) (Summary, error) {
	scale := in.Scale
	if scale < 1 {
		scale = 1
	}
	count := func(s string) int { return int(math.Ceil(float64(in.Count(s)) * scale)) }
	// The messages' tokens are known from the caller's cache: the ratio of
	// chars to tokens comes from them, without tokenising the transcript.
	msgTokens := int(math.Ceil(float64(in.MessageTokens) * scale))
	budget := TranscriptBudget(in.Window, in.MaxTokens, count, in.PrevSummary, in.Messages, msgTokens)
	if budget <= 0 {
		return Summary{}, fmt.Errorf("summariser window of %d tokens has %w", in.Window, ErrNoRoom)
	}
	return Summary{msgs: in.Messages, prev: in.PrevSummary, window: in.Window, budget: budget}, nil
}

// Prompt is the summary call's one user message: the preamble, the task,
// the previous summary (an iterative update), the transcript and the
// template (BuildPromptFor).
func (s Summary) Prompt() string {
	return BuildPromptFor(s.window, s.prev, Transcript(s.msgs, s.budget))
}

// Halved is s with half the transcript it sends, for one more try after
// the summariser refused the prompt as too long: its tokenizer counts more
// than the estimate allowed for, or its slots share a KV cache that is full
// (llama.cpp's 500). Half of what was sent, which may be well under the
// budget.
func (s Summary) Halved() Summary {
	s.budget = min(s.budget, len(Transcript(s.msgs, s.budget))) / 2
	return s
}

// Finish is the summary to store from the summariser's text: the latest
// user ask pinned at the top of "## Active Task" (SeedActiveTask), secrets
// redacted, a block's line on kept messages copied from the history left
// out (the block gives its own).
func Finish(text, latestUserAsk string) string {
	return redact.Secrets(SeedActiveTask(dropKeptNotes(text), latestUserAsk))
}
