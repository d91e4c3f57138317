package geminitest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
)

// Ledger is what an upstream remembers of the thought signatures it
// issued, to verify them when a client sends them back: each signature
// with the part it was issued on (a function call's name and arguments, or
// a text answer) and the prompt it was produced after. A real signature is
// encrypted thought context the API decrypts; one it cannot read, or one
// sent on another part, is refused; with Options.BindPrefix so is one sent
// after another prompt than it was produced after.
type Ledger struct {
	mu       sync.Mutex // guards all below
	issued   map[string]signed
	n        int
	verified int
}

type signed struct {
	Call       bool // on a functionCall part; else on text
	Name, Args string
	Prefix     [32]byte // the prompt the answer was produced after
}

// DummySignatures are the values Google's FAQ gives for histories that
// carry no real signature (migrated from another model, or written by
// hand): the API skips validating them.
var DummySignatures = []string{"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{issued: map[string]signed{}} }

// Call issues the signature for a functionCall part of name with args,
// answering r.
func (l *Ledger) Call(r *Request, name string, args json.RawMessage) string {
	return l.issue(signed{Call: true, Name: name, Args: compact(args), Prefix: sha256.Sum256(r.Prompt)})
}

// Text issues the signature for the last part of a text answer to r.
func (l *Ledger) Text(r *Request) string { return l.issue(signed{Prefix: sha256.Sum256(r.Prompt)}) }

func (l *Ledger) issue(s signed) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	h := sha256.Sum256(fmt.Appendf(nil, "%d|%v|%s|%s|%x", l.n, s.Call, s.Name, s.Args, s.Prefix))
	// Real signatures are long opaque base64; three hashes give the
	// length of a short one.
	raw := append(append(h[:], h[:]...), h[:]...)
	sig := base64.StdEncoding.EncodeToString(raw)
	l.issued[sig] = s
	return sig
}

// Verified is how many signatures sent back were accepted so far.
func (l *Ledger) Verified() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.verified
}

// verify checks every signature the contents carry and returns how many
// were accepted; with bind, each against the prompt before its content.
func (l *Ledger) verify(cs []content, r *Request, bind bool) (int, *Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	lead := len(r.Parts) - len(cs) // systemInstruction and tools
	start := 0
	for k := range lead {
		start += r.Parts[k]
	}
	for i, c := range cs {
		prefix := sha256.Sum256(r.Prompt[:start])
		start += r.Parts[lead+i]
		for _, p := range c.Parts {
			if !p.Signed || isDummy(p.Signature) {
				continue
			}
			s, ok := l.issued[p.Signature]
			switch {
			case !ok, c.Role != "model":
				return n, corrupted()
			case s.Call && (p.Kind != "functionCall" || p.Name != s.Name || p.Args != s.Args):
				return n, corrupted() // moved to another part
			case !s.Call && p.Kind == "functionCall":
				return n, corrupted()
			case bind && s.Prefix != prefix:
				return n, corrupted() // what came before it changed
			}
			n++
		}
	}
	l.verified += n
	return n, nil
}

func corrupted() *Error { return invalid("Corrupted thought signature.") }

func isDummy(s string) bool {
	for _, d := range DummySignatures {
		if s == d {
			return true
		}
	}
	return false
}
