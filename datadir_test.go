package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestDefaultDBPath(t *testing.T) {
	for _, r := range []struct {
		rule string
		goos string
		env  map[string]string
		want string // "" when an error is wanted
	}{
		{"XDG_DATA_HOME first", "linux", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/ctxpress/ctxpress.db"},
		{"else ~/.local/share", "linux", map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/ctxpress/ctxpress.db"},
		{"a relative XDG_DATA_HOME is ignored, as the spec says", "linux", map[string]string{"XDG_DATA_HOME": "data", "HOME": "/home/u"}, "/home/u/.local/share/ctxpress/ctxpress.db"},
		{"macOS: Application Support", "darwin", map[string]string{"HOME": "/Users/u"}, "/Users/u/Library/Application Support/ctxpress/ctxpress.db"},
		{"macOS honours XDG_DATA_HOME when set", "darwin", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/Users/u"}, "/xdg/ctxpress/ctxpress.db"},
		{"no HOME: an error that says what to pass", "linux", nil, ""},
	} {
		got, err := defaultDBPath(r.goos, func(k string) string { return r.env[k] })
		switch {
		case r.want == "" && (err == nil || !strings.Contains(err.Error(), "--db FILE")):
			t.Errorf("%s: %q, %v; want an error naming --db", r.rule, got, err)
		case r.want != "" && (err != nil || got != r.want):
			t.Errorf("%s: %q, %v; want %q", r.rule, got, err, r.want)
		}
	}
}

// Without a db named anywhere, serve's db is in the user data directory,
// created when missing; a db named in the file, the environment or a
// flag is kept as it was, "" (memory) included.
func TestDefaultDBIsInTheDataDirectory(t *testing.T) {
	xdg, home := t.TempDir(), t.TempDir()
	env := map[string]string{"XDG_DATA_HOME": xdg, "HOME": home}
	c, _, err := loadYAML(t, "", nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(xdg, "ctxpress", "ctxpress.db"); c.DB != want {
		t.Fatalf("db %q, want %q", c.DB, want)
	}
	delete(env, "XDG_DATA_HOME")
	if c, _, _ = loadYAML(t, "", nil, env); c.DB != filepath.Join(home, ".local", "share", "ctxpress", "ctxpress.db") {
		t.Fatalf("without XDG_DATA_HOME: db %q", c.DB)
	}
	st, err := openStore(c, zerolog.Nop())
	if err != nil {
		t.Fatalf("the data directory is not created: %v", err)
	}
	st.Close()
	if _, err := os.Stat(c.DB); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		yaml string
		args []string
		env  map[string]string
		want string
	}{
		{yaml: "db: here.db\n", want: "here.db"},
		{env: map[string]string{"CTXPRESS_DB": "env.db"}, want: "env.db"},
		{args: []string{"--db", "flag.db"}, want: "flag.db"},
		{args: []string{"--db", ""}, want: ""},
		{yaml: "db: \"\"\n", want: ""},
	} {
		if c, _, err := loadYAML(t, r.yaml, r.args, r.env); err != nil || c.DB != r.want {
			t.Errorf("%q %q %v: db %q, %v; want %q", r.yaml, r.args, r.env, c.DB, err, r.want)
		}
	}
}
