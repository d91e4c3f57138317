package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ctxpress/ctxpress/internal/logline"
	"github.com/rs/zerolog"
)

// newLogger builds the process logger and the close that writes its pending
// lines; secrets never reach it because no caller logs headers or keys. Its
// lines are buffered and written by a background goroutine (logline), so a
// request's log line is an append on the request's goroutine.
func newLogger(c logConfig, w io.Writer) (zerolog.Logger, func(), error) {
	level, err := logSettings(c, w)
	if err != nil {
		return zerolog.Nop(), func() {}, err
	}
	out := logline.New(w, level.options)
	return zerolog.New(out).Level(level.level).With().Timestamp().Logger(), func() { _ = out.Close() }, nil
}

// logSetting is what log: says, resolved for the output w.
type logSetting struct {
	level   zerolog.Level
	options logline.Options
}

// logSettings checks log: and resolves format auto for w (nil: not yet
// known; auto is then json): console when w is a terminal, where a person
// reads it, json otherwise (a file, a pipe, a container's log driver).
func logSettings(c logConfig, w io.Writer) (logSetting, error) {
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil || c.Level == "" {
		return logSetting{}, fmt.Errorf("log level %q: want trace, debug, info, warn or error", c.Level)
	}
	s := logSetting{level: level}
	tty := isTerminal(w)
	switch c.Format {
	case "json":
	case "console":
		s.options = logline.Options{Console: true, Color: tty}
	case "auto":
		s.options = logline.Options{Console: tty, Color: tty}
	default:
		return logSetting{}, fmt.Errorf("log format %q: want auto, console or json", c.Format)
	}
	return s, nil
}

// isTerminal says whether w is a terminal (isTerminalFile), without a
// dependency.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminalFile(f)
}
