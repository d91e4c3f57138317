// Package redact finds credentials in text and replaces them, so they reach
// neither a summary model, a stored summary nor an error message. It
// stands alone so the summariser (compactor) and the wire adapters, which
// quote upstream errors, can share it: wire does not import compactor.
package redact

import "strings"

// Marker replaces every secret Secrets finds.
const Marker = "[REDACTED]"

// Minimum lengths: below them a "secret" is more likely an ordinary word,
// a placeholder or a short example than a credential.
const (
	minBearer     = 8  // token after "Bearer "
	minPrefixed   = 20 // chars after sk-, ghp_, github_pat_ …
	minSlack      = 10 // chars after xox?-
	minAssignment = 8  // value of password=, api_key: …
	maxQuoted     = 1024
	maxKeyLen     = 64
)

// Secrets replaces the secrets in s with Marker:
//
//   - bearer tokens ("Bearer xxx": the token, the word stays),
//   - OpenAI sk-… / sk-proj-… and Anthropic sk-ant-… keys,
//   - AWS access key ids (AKIA/ASIA + 16) and aws_secret_access_key values,
//   - GitHub tokens (ghp_, gho_, ghs_, ghu_, ghr_, github_pat_),
//   - Slack tokens (xoxb-, xoxp-, …),
//   - PEM private key blocks (BEGIN … PRIVATE KEY … END … PRIVATE KEY),
//   - the value of password=, passwd:, secret=, token=, api_key=, access_key=
//     style assignments (any key ending so, in code, env files, YAML, JSON
//     and URL queries) when it is long: at least 8 chars, not a plain number,
//     and, unquoted, with a digit and not a call like token=make_token(…).
//
// Ordinary hex hashes, git SHAs and uuids are left alone: only their key
// (token=…) would make them secret. Secrets is a single left-to-right scan
// with bounded look-around, linear in len(s); it returns s itself when there
// is nothing to redact. Replaced spans start and end at ASCII bytes, so
// valid UTF-8 stays valid.
func Secrets(s string) string {
	var b strings.Builder
	last := 0         // s[last:i] is not yet copied to b
	noPEMEnd := false // no "-----END " after the current position: stop searching
	for i := 0; i < len(s); i++ {
		from, to := 0, 0
		switch s[i] {
		case 'B', 'b':
			from, to = matchBearer(s, i)
		case 's', 'g', 'x', 'A':
			from, to = matchPrefixed(s, i)
		case '-':
			from, to = matchPrivateKey(s, i, &noPEMEnd)
		case '=', ':':
			from, to = matchAssignment(s, i)
		}
		if to <= from {
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:from])
		b.WriteString(Marker)
		last = to
		i = to - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// wordStart reports whether a token may start at s[i]: it is not glued to a
// preceding word (so "task-…" is not an "sk-" key).
func wordStart(s string, i int) bool {
	return i == 0 || !isAlnum(s[i-1]) && s[i-1] != '_'
}

// run returns the end of the run of bytes from i for which ok holds.
func run(s string, i int, ok func(byte) bool) int {
	for i < len(s) && ok(s[i]) {
		i++
	}
	return i
}

// hasPrefixFold reports whether s[i:] starts with the lower-case ASCII
// prefix p, ignoring case.
func hasPrefixFold(s string, i int, p string) bool {
	if len(s)-i < len(p) {
		return false
	}
	for k := 0; k < len(p); k++ {
		c := s[i+k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != p[k] {
			return false
		}
	}
	return true
}

func tokenByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("._~+/=-", c) >= 0
}

// matchBearer matches the token of "Bearer <token>". A token needs a digit or
// 20+ chars, so prose like "Bearer authentication" stays.
func matchBearer(s string, i int) (int, int) {
	if !wordStart(s, i) || !hasPrefixFold(s, i, "bearer") {
		return 0, 0
	}
	j := i + len("bearer")
	k := run(s, j, func(c byte) bool { return c == ' ' || c == '\t' })
	if k == j || k-j > 4 {
		return 0, 0
	}
	end := run(s, k, tokenByte)
	tok := s[k:end]
	if len(tok) < minBearer || len(tok) < 20 && !strings.ContainsAny(tok, "0123456789") {
		return 0, 0
	}
	return k, end
}

// matchPrefixed matches keys recognisable by their prefix: sk-, AKIA/ASIA,
// GitHub and Slack tokens.
func matchPrefixed(s string, i int) (int, int) {
	if !wordStart(s, i) {
		return 0, 0
	}
	keyByte := func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }
	var start, minLen int
	var ok func(byte) bool
	switch {
	case strings.HasPrefix(s[i:], "sk-"): // also sk-proj-, sk-ant-
		start, minLen, ok = i+3, minPrefixed, keyByte
	case strings.HasPrefix(s[i:], "github_pat_"):
		start, minLen, ok = i+len("github_pat_"), minPrefixed, func(c byte) bool { return isAlnum(c) || c == '_' }
	case len(s)-i >= 4 && s[i] == 'g' && s[i+1] == 'h' && strings.IndexByte("posur", s[i+2]) >= 0 && s[i+3] == '_':
		start, minLen, ok = i+4, minPrefixed, isAlnum
	case len(s)-i >= 5 && strings.HasPrefix(s[i:], "xox") && strings.IndexByte("abposr", s[i+3]) >= 0 && s[i+4] == '-':
		start, minLen, ok = i+5, minSlack, func(c byte) bool { return isAlnum(c) || c == '-' }
	case strings.HasPrefix(s[i:], "AKIA") || strings.HasPrefix(s[i:], "ASIA"):
		end := run(s, i+4, func(c byte) bool { return c >= 'A' && c <= 'Z' || isDigit(c) })
		if end-(i+4) != 16 || end < len(s) && (isAlnum(s[end]) || s[end] == '_') {
			return 0, 0
		}
		return i, end
	default:
		return 0, 0
	}
	end := run(s, start, ok)
	if end-start < minLen {
		return 0, 0
	}
	return i, end
}

// matchPrivateKey matches a PEM private key block, BEGIN line to END line.
// Without an END line (a truncated paste) it takes the base64 lines after
// the BEGIN line. *noEnd records that no END line follows, so a text full
// of BEGIN lines is still scanned once.
func matchPrivateKey(s string, i int, noEnd *bool) (int, int) {
	const begin = "-----BEGIN "
	if !strings.HasPrefix(s[i:], begin) {
		return 0, 0
	}
	hdr := s[i+len(begin) : min(len(s), i+len(begin)+64)]
	h := strings.Index(hdr, "-----")
	if h < 0 || !strings.Contains(hdr[:h], "PRIVATE KEY") {
		return 0, 0
	}
	body := i + len(begin) + h + len("-----")
	if !*noEnd {
		if e := strings.Index(s[body:], "-----END "); e >= 0 {
			e += body + len("-----END ")
			tail := s[e:min(len(s), e+64)]
			if c := strings.Index(tail, "-----"); c >= 0 {
				return i, e + c + len("-----")
			}
			return i, run(s, e, func(c byte) bool { return c != '\n' })
		}
		*noEnd = true
	}
	end := body // through the base64 lines that follow, up to a blank line
	for end < len(s) {
		k := end
		if s[k] == '\r' {
			k++
		}
		if k >= len(s) || s[k] != '\n' {
			break
		}
		l := run(s, k+1, func(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '=' })
		if l == k+1 {
			break
		}
		end = l
	}
	return i, end
}

// matchAssignment matches the value of `key = value`, `key: value`,
// `"key": "value"` or `?key=value` when the key names a secret (see
// secretKey). s[i] is the '=' or ':'.
func matchAssignment(s string, i int) (int, int) {
	op, v := s[i], i+1
	if op == ':' && v < len(s) && s[v] == '=' {
		v++ // Go's :=
	} else if v < len(s) && s[v] == op || i > 0 && strings.IndexByte("=!<>:", s[i-1]) >= 0 {
		return 0, 0 // ==, !=, <=, ::, and the '=' of :=
	}
	// The key, read backwards: spaces, an optional (escaped) quote, a name.
	k := i
	for n := 0; k > 0 && s[k-1] == ' ' && n < 4; n++ {
		k--
	}
	if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
		k--
		if k > 0 && s[k-1] == '\\' {
			k--
		}
	}
	ke := k
	for k > 0 && ke-k < maxKeyLen && (isAlnum(s[k-1]) || strings.IndexByte("_-.", s[k-1]) >= 0) {
		k--
	}
	if !secretKey(s[k:ke]) {
		return 0, 0
	}
	// The value.
	for n := 0; v < len(s) && (s[v] == ' ' || s[v] == '\t') && n < 4; n++ {
		v++
	}
	if v < len(s) && s[v] == '\\' && v+1 < len(s) && s[v+1] == '"' {
		v++ // an escaped quote inside a JSON string: \"value\"
	}
	if v < len(s) && (s[v] == '"' || s[v] == '\'' || s[v] == '`') {
		q := s[v]
		end := v + 1
		for end < len(s) && end-v <= maxQuoted && s[end] != q && s[end] != '\n' {
			end++
		}
		if end >= len(s) || s[end] != q {
			return 0, 0
		}
		val := strings.TrimSuffix(s[v+1:end], `\`)
		if !secretValue(val) {
			return 0, 0
		}
		return v + 1, v + 1 + len(val)
	}
	end := run(s, v, func(c byte) bool { return isAlnum(c) || strings.IndexByte("_-./+~!@#%^*", c) >= 0 })
	end = run(s, end, func(c byte) bool { return c == '=' }) // base64 padding
	val := s[v:end]
	if !secretValue(val) || !strings.ContainsAny(val, "0123456789") || end < len(s) && s[end] == '(' {
		return 0, 0
	}
	return v, end
}

// secretKey reports whether an assignment's key names a secret: it ends in
// one of the words below, at a word boundary (snake, kebab, dotted or
// camelCase: db_password, api-key, self.token, accessToken).
func secretKey(key string) bool {
	for _, w := range [...]string{"password", "passwd", "secret", "token", "api_key", "apikey", "api-key", "access_key", "secret_key", "private_key"} {
		p := len(key) - len(w)
		if p < 0 || !hasPrefixFold(key, p, w) {
			continue
		}
		if p == 0 || !isAlnum(key[p-1]) || key[p] >= 'A' && key[p] <= 'Z' && key[p-1] >= 'a' && key[p-1] <= 'z' {
			return true
		}
	}
	return false
}

// secretValue reports whether an assignment's value may be a secret: long
// enough, not a number, not a variable reference or already redacted.
func secretValue(v string) bool {
	if len(v) < minAssignment || v == Marker || strings.HasPrefix(v, "$") || strings.HasPrefix(v, "{{") {
		return false
	}
	for k := 0; k < len(v); k++ {
		if !isDigit(v[k]) && v[k] != '.' && v[k] != '-' {
			return true
		}
	}
	return false
}
