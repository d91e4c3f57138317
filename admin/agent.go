package admin

import "bytes"

// maxAgent bounds the agent name kept from a User-Agent.
const maxAgent = 64

// AgentOf is the client a User-Agent names, for people to tell
// conversations apart: its first product token, name and version
// ("claude-cli/2.0.14", "codex_cli_rs/0.98.0"), at most maxAgent bytes; a
// view of userAgent, nil when it names none.
func AgentOf(userAgent []byte) []byte {
	ua := bytes.TrimSpace(userAgent)
	if i := bytes.IndexAny(ua, " \t("); i >= 0 {
		ua = ua[:i]
	}
	if len(ua) > maxAgent {
		ua = ua[:maxAgent]
	}
	for _, c := range ua {
		if c < 0x21 || c > 0x7e { // not a token: nothing to show
			return nil
		}
	}
	if len(ua) == 0 {
		return nil
	}
	return ua
}
