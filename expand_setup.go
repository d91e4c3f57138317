package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/state"
)

// openExpand is the ways back markers name, from the expand: section and
// where ctxpress listens, and the directory originals are written to
// (nil: none). Files are on for an agent on this machine (files: auto and
// a loopback listener, or files: true) when the directory is writable;
// nil ways when originals are not kept.
func openExpand(cfg config, addr net.Addr, log zerolog.Logger) (*expand.Ways, *state.OriginalFiles) {
	ec := cfg.Expand
	if !ec.Keep {
		return nil, nil
	}
	// Observe mode forwards requests as sent: no tool is offered.
	ways := &expand.Ways{Tool: ec.Tool && cfg.Mode != proxy.ModeObserve, URL: ec.URL}
	if ec.URL != "" {
		ways.URLHeader = urlHeader(cfg)
	}
	if !filesOn(ec.Files, addr) {
		if !ways.Any() {
			log.Info().Msg("agents reach ctxpress from other machines: markers name each original's reference (for ctxpress expand REF); set expand.tool: true to give agents the ctxpress_expand tool, or expand.files: true when they share this machine's files")
		}
		return ways, nil
	}
	dir := ec.Dir
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			log.Warn().Err(err).Msg("no directory for originals' files (set expand.dir); markers name the other ways back")
			return ways, nil
		}
		dir = filepath.Join(cache, "ctxpress", "originals")
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // a marker's path works from the agent's directory too
	}
	files, err := state.OpenOriginalFiles(dir, cfg.Retention, 0)
	if err != nil {
		log.Warn().Err(err).Str("dir", dir).Msg("originals' directory not writable; markers name the other ways back (set expand.dir)")
		return ways, nil
	}
	ways.Dir = dir
	return ways, files
}

// filesOn applies expand.files: auto means the agent is on this machine,
// which a loopback listener says.
func filesOn(setting string, addr net.Addr) bool {
	switch setting {
	case localTrue:
		return true
	case localFalse:
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// urlHeader is the header a curl of GET /ctxpress/expand/REF must send to
// be answered in the conversation's namespace: the key its requests
// carry, a namespace header's value, or nothing with namespace: none.
func urlHeader(cfg config) string {
	f := strings.Fields(cfg.Namespace)
	switch {
	case len(cfg.Auth.Keys) > 0:
		return "Authorization: Bearer <your ctxpress key>"
	case len(f) == 1 && strings.EqualFold(f[0], "none"):
		return ""
	case len(f) == 2 && strings.EqualFold(f[0], "header"):
		return f[1] + ": <your " + f[1] + ">"
	}
	return "Authorization: Bearer <your API key>"
}
