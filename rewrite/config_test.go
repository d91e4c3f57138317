package rewrite

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A Pipeline without a wire adapter understands no body: every request
// would go upstream untouched, silently. Validate names the missing field
// and New, given one anyway, panics (a programming error) instead of
// building it.
func TestPipelineWithoutAFormatIsRefused(t *testing.T) {
	err := Config{}.Validate()
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "Format") {
		t.Errorf("Validate of a Config without Format: %v", err)
	}
	if err := (Config{Format: chatFormat}).Validate(); err != nil {
		t.Errorf("Validate with the chat adapter: %v", err)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "Config.Format is nil") {
			t.Errorf("New without a Format: panic %v", p)
		}
	}()
	New(Config{})
	t.Error("New built a Pipeline without a Format")
}
