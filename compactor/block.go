package compactor

import (
	"strings"

	"github.com/ctxpress/ctxpress/redact"
)

const (
	blockOpen  = "<conversation_summary>"
	blockClose = "</conversation_summary>"
	// activeTask is the template's last heading, the one SeedActiveTask fills.
	activeTask = "## Active Task"
	// maxSeed caps the seeded ask: a pasted log as "the ask" must not double
	// the summary; the head and tail of it still say what was asked.
	maxSeed = 4000
)

// Block renders the summary block placed in the system message (or at the
// head of a user message):
//
//	<conversation_summary>
//	{SummaryPrefix}
//	{kept}
//	{summary}
//	</conversation_summary>
//
// kept is the line saying where the messages the summary replaces are
// kept (KeptNote, stored with the summary so the block stays the same);
// "" leaves its line out, as blocks were before messages were kept. A
// closing tag inside the summary is defused, so the block always ends
// where Block ends it.
func Block(summary, kept string) string {
	summary = strings.ReplaceAll(strings.TrimSpace(summary), blockClose, "</conversation-summary>")
	if kept = oneLine(strings.TrimSpace(kept)); kept != "" {
		kept = strings.ReplaceAll(kept, blockClose, "</conversation-summary>") + "\n"
	}
	return blockOpen + "\n" + SummaryPrefix + "\n" + kept + summary + "\n" + blockClose
}

// SeedActiveTask makes sure the summary's "## Active Task" section starts
// with the latest user ask, quoted verbatim (as a Markdown blockquote,
// redacted, head+tail cut above 4000 chars), so the continuing model sees
// exactly what the user last asked even if the summary model paraphrased or
// dropped it. A missing section is appended; the model's own text under an
// existing one is kept after the seed. Seeding twice with the same ask
// changes nothing. An empty ask returns the summary unchanged.
func SeedActiveTask(summary, latestUserAsk string) string {
	ask := strings.TrimSpace(latestUserAsk)
	if ask == "" {
		return summary
	}
	ask = fitMiddle(redact.Secrets(ask), maxSeed)
	seed := "Latest user request (verbatim):\n> " + strings.ReplaceAll(ask, "\n", "\n> ")

	summary = strings.TrimRight(summary, " \t\r\n")
	h := activeTaskHeading(summary)
	if h < 0 {
		if summary != "" {
			summary += "\n\n"
		}
		return summary + activeTask + "\n" + seed
	}
	eol := strings.IndexByte(summary[h:], '\n')
	if eol < 0 {
		return summary + "\n" + seed
	}
	head, rest := summary[:h+eol+1], strings.TrimLeft(summary[h+eol+1:], "\r\n")
	if strings.HasPrefix(rest, seed) {
		return summary
	}
	if rest == "" {
		return head + seed
	}
	return head + seed + "\n\n" + rest
}

// activeTaskHeading returns the offset of the last Markdown heading line
// naming the active task ("## Active Task", "### 13. Active task:", …), or -1.
func activeTaskHeading(s string) int {
	found := -1
	for off := 0; off < len(s); {
		line := s[off:]
		if nl := strings.IndexByte(line, '\n'); nl >= 0 {
			line = line[:nl]
		}
		if t := strings.TrimLeft(line, " "); strings.HasPrefix(t, "#") &&
			strings.Contains(strings.ToLower(t), "active task") {
			found = off
		}
		off += len(line) + 1
	}
	return found
}
