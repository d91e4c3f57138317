package main

import (
	"io"
	"os"
	"testing"
)

func TestLogFormatRules(t *testing.T) {
	file, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rows := []struct {
		rule    string
		format  string
		out     io.Writer
		console bool
		err     bool
	}{
		{"auto writes JSON to a file", "auto", file, false, false},
		{"auto writes JSON when the output is not yet known", "auto", nil, false, false},
		{"json is JSON", "json", file, false, false},
		{"console is console anywhere, without colors off a terminal", "console", file, true, false},
		{"another format is refused", "yaml", file, false, true},
		{"an empty format is refused", "", file, false, true},
	}
	for _, r := range rows {
		s, err := logSettings(logConfig{Level: "info", Format: r.format}, r.out)
		if (err != nil) != r.err || s.options.Console != r.console || s.options.Color {
			t.Errorf("%s: got %+v, %v", r.rule, s.options, err)
		}
	}
}
