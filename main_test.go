package main

import (
	"net"
	"strings"
	"testing"
)

func TestRunUnknownCommand(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"frobnicate"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "ctxpress ") {
		t.Fatalf("version: code %d, %q", code, out.String())
	}
}

// The warning fires when clients beyond this machine can reach a proxy that
// asks them for no key. In a container the listener is always 0.0.0.0, so
// only CTXPRESS_PUBLISHED_ADDR, set where the port is published, says who.
func TestExposureWarning(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		keys      int
		published string
		warn      bool
	}{
		{"127.0.0.1:8484", 0, "", false},
		{"[::1]:8484", 0, "", false},
		{"0.0.0.0:8484", 0, "", true},
		{"[::]:8484", 0, "", true},
		{"192.0.2.10:8484", 0, "", true},
		{"0.0.0.0:8484", 1, "", false},
		// docker-compose.yml: published on the host's loopback.
		{"0.0.0.0:8484", 0, "127.0.0.1:8484", false},
		{"0.0.0.0:8484", 0, "[::1]:8484", false},
		{"0.0.0.0:8484", 0, "127.0.0.1", false},
		// Published on every interface, or a LAN address: still open.
		{"0.0.0.0:8484", 0, "0.0.0.0:8484", true},
		{"0.0.0.0:8484", 0, "192.0.2.10:8484", true},
		{"0.0.0.0:8484", 0, "not an address", true},
	} {
		addr, _ := net.ResolveTCPAddr("tcp", tc.addr)
		msg := exposureWarning(addr, tc.keys, tc.published)
		if (msg != "") != tc.warn || tc.warn && !strings.Contains(msg, "auth.keys") {
			t.Errorf("exposureWarning(%s, %d keys, published %q) = %q", tc.addr, tc.keys, tc.published, msg)
		}
		if tc.warn && tc.published != "" && !strings.Contains(msg, tc.published) {
			t.Errorf("published %q: the warning names the listener, not where clients reach it: %q", tc.published, msg)
		}
	}
}
