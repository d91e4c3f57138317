package main

import (
	"errors"
	"path/filepath"
)

// dbFileName is the db's name inside the data directory.
const dbFileName = "ctxpress.db"

// defaultDBPath is the db serve uses when neither the file, the
// environment nor a flag names one: in the user's data directory, so that
// `ctxpress conversations` run from any directory finds the same file a
// server started from any other directory writes. $XDG_DATA_HOME wins
// where it is set (an absolute path, as the XDG spec requires); else
// ~/Library/Application Support on macOS, %LocalAppData% on Windows, and
// ~/.local/share elsewhere. goos is runtime.GOOS, a parameter for tests.
func defaultDBPath(goos string, getenv func(string) string) (string, error) {
	if x := getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "ctxpress", dbFileName), nil
	}
	if goos == "windows" {
		if d := getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "ctxpress", dbFileName), nil
		}
		return "", errors.New(`no directory for the db: %LocalAppData% is not set; pass --db FILE (env CTXPRESS_DB), or --db "" to keep state in memory`)
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New(`no directory for the db: neither XDG_DATA_HOME nor HOME is set; pass --db FILE (env CTXPRESS_DB), or --db "" to keep state in memory`)
	}
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "ctxpress", dbFileName), nil
	}
	return filepath.Join(home, ".local", "share", "ctxpress", dbFileName), nil
}
