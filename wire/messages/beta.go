package messages

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Anthropic's request headers besides its key.
const (
	HeaderVersion = "Anthropic-Version"
	HeaderBeta    = "Anthropic-Beta"
)

// BetaThinkingBinding is the anthropic-beta that opens
// thinking.block_binding: without it a request that asks drop_block
// (rewrite.Result.DropMismatched) is refused.
const BetaThinkingBinding = "thinking-binding-controls-2026-08-01"

// WithBeta is the anthropic-beta list values (one entry per header, each
// a comma-separated list) with beta appended: the client's betas in their
// order, blanks left out, joined by commas. added is false when values
// already name beta: the headers are then left as sent.
func WithBeta(values []string, beta string) (merged string, added bool) {
	var betas []string
	for _, v := range values {
		for b := range strings.SplitSeq(v, ",") {
			switch b = strings.TrimSpace(b); b {
			case beta:
				return "", false
			case "":
			default:
				betas = append(betas, b)
			}
		}
	}
	return strings.Join(append(betas, beta), ","), true
}

// AsksDropBlock reports whether a Messages body asks the upstream to drop
// thinking blocks whose prefix changed (it then needs BetaThinkingBinding).
func AsksDropBlock(body []byte) bool {
	return gjson.GetBytes(body, "thinking.block_binding.prefix_mismatch_behavior").String() == "drop_block"
}
