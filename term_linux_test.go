package main

import (
	"os"
	"testing"
)

// /dev/null is a character device, not a terminal: a daemon started with
// 2>/dev/null formatted every line for people for nothing.
func TestAutoLogFormatIsJSONOnDevNullAndConsoleOnATerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if s, err := logSettings(logConfig{Level: "info", Format: "auto"}, null); err != nil || s.options.Console {
		t.Errorf("auto on /dev/null: %+v, %v; want JSON", s.options, err)
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0) // a terminal's master side
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer pty.Close()
	if s, err := logSettings(logConfig{Level: "info", Format: "auto"}, pty); err != nil || !s.options.Console || !s.options.Color {
		t.Errorf("auto on a terminal: %+v, %v; want console with colors", s.options, err)
	}
}
