package responsestest

import (
	"sync"

	"github.com/tidwall/gjson"
)

// Ledger is what an upstream issued, as OpenAI remembers or can verify it:
// the encrypted content of each reasoning and compaction item it produced
// (OpenAI decrypts it; bytes it did not produce cannot be verified), the
// item each reasoning item preceded, and the responses and items it
// stored. Safe for concurrent use.
type Ledger struct {
	mu        sync.Mutex
	encrypted map[string]issued // by encrypted_content
	reasoning map[string]string // item id → the reasoning item it was produced after
	responses map[string]bool   // response id → stored
	items     map[string]bool   // item ids of stored responses
}

// issued is one encrypted item: its id and the id of the item after it.
type issued struct{ id, next string }

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{encrypted: map[string]issued{}, reasoning: map[string]string{},
		responses: map[string]bool{}, items: map[string]bool{}}
}

// Record notes a response the upstream sent: the JSON response object (the
// whole non-streamed answer, or the "response" of response.completed), and
// whether it was stored (its request did not say "store": false).
func (l *Ledger) Record(response []byte, stored bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := gjson.ParseBytes(response)
	l.responses[r.Get("id").String()] = stored
	out := r.Get("output").Array()
	for i, it := range out {
		id := it.Get("id").String()
		if stored && id != "" {
			l.items[id] = true
		}
		enc := it.Get("encrypted_content").String()
		if enc == "" {
			continue
		}
		is := issued{id: id}
		if t := it.Get("type").String(); t == "reasoning" && i+1 < len(out) {
			is.next = out[i+1].Get("id").String()
			if is.next != "" {
				l.reasoning[is.next] = id
			}
		}
		l.encrypted[enc] = is
	}
}

func (l *Ledger) stored(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.items[id]
}

// verify checks items against what was issued: encrypted content verbatim,
// each issued reasoning item right before the item it was produced with
// (and that item right after it), previous_response_id a stored response.
// A nil ledger verifies nothing.
func (l *Ledger) verify(items []Item, previous string) *Error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if previous != "" && !l.responses[previous] {
		return invalid("previous_response_id", "previous_response_not_found", "Previous response with id '%s' not found.", previous)
	}
	for i, it := range items {
		enc := gjson.Get(it.Raw, "encrypted_content").String()
		if enc != "" {
			is, ok := l.encrypted[enc]
			if !ok {
				return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_encrypted_content",
					Message: "The encrypted content for item " + it.ID + " could not be verified. Reason: Encrypted content could not be decrypted or parsed."}
			}
			if it.Type == "reasoning" && is.next != "" && (i+1 == len(items) || items[i+1].ID != is.next) {
				return invalid("input", "", "Item '%s' of type 'reasoning' was provided without its required following item.", it.ID)
			}
		}
		if rs, ok := l.reasoning[it.ID]; ok && it.ID != "" && it.Type != "item_reference" && (i == 0 || items[i-1].ID != rs || items[i-1].Type != "reasoning") {
			return invalid("input", "", "Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'.", it.ID, it.Type, rs)
		}
	}
	return nil
}
