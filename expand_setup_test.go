package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/expand"
)

// The ways back markers name follow the configuration and the machine:
// files only for an agent on this machine and a directory that can be
// written, the tool only outside observe mode, the URL with the header
// the endpoint needs; nothing at all when originals are not kept.
func TestOpenExpandNamesOnlyTheWaysThatWork(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8484}
	anywhere := &net.TCPAddr{IP: net.IPv4zero, Port: 8484}
	dir := filepath.Join(t.TempDir(), "originals")
	readOnly := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		readOnly = "/proc/ctxpress-originals" // root writes anywhere but here
	}
	tests := []struct {
		name string
		set  func(*config)
		addr net.Addr
		want *expand.Ways
	}{
		{"default on this machine: files", func(c *config) {}, loopback, &expand.Ways{Dir: dir}},
		{"reached from elsewhere: no files", func(c *config) {}, anywhere, &expand.Ways{}},
		{"files: true from elsewhere (a shared volume)", func(c *config) { c.Expand.Files = localTrue }, anywhere, &expand.Ways{Dir: dir}},
		{"files: false", func(c *config) { c.Expand.Files = localFalse }, loopback, &expand.Ways{}},
		{"a directory that cannot be written: no files", func(c *config) { c.Expand.Dir = readOnly }, loopback, &expand.Ways{}},
		{"tool", func(c *config) { c.Expand.Tool = true }, anywhere, &expand.Ways{Tool: true}},
		{"tool in observe mode: none", func(c *config) { c.Expand.Tool = true; c.Mode = "observe" }, anywhere, &expand.Ways{}},
		{"url with the client's key", func(c *config) { c.Expand.URL = "http://10.0.0.5:8484" }, anywhere,
			&expand.Ways{URL: "http://10.0.0.5:8484", URLHeader: "Authorization: Bearer <your API key>"}},
		{"url with namespace none", func(c *config) { c.Expand.URL = "http://10.0.0.5:8484"; c.Namespace = "none" }, anywhere,
			&expand.Ways{URL: "http://10.0.0.5:8484"}},
		{"url with a namespace header", func(c *config) { c.Expand.URL = "http://h:1"; c.Namespace = "header X-User" }, anywhere,
			&expand.Ways{URL: "http://h:1", URLHeader: "X-User: <your X-User>"}},
		{"originals not kept: no ways, no markers", func(c *config) { c.Expand.Keep = false; c.Expand.Tool = true }, loopback, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Expand.Dir = dir
			tc.set(&cfg)
			ways, files := openExpand(cfg, tc.addr, zerolog.Nop())
			switch {
			case tc.want == nil:
				if ways != nil || files != nil {
					t.Fatalf("ways %+v, files %v; want none", ways, files)
				}
				return
			case ways == nil:
				t.Fatal("no ways")
			case *ways != *tc.want:
				t.Fatalf("ways %+v, want %+v", *ways, *tc.want)
			case (files != nil) != (tc.want.Dir != ""):
				t.Fatalf("files %v with ways %+v", files, *ways)
			}
		})
	}
}
