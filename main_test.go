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

func TestExposureWarning(t *testing.T) {
	for _, tc := range []struct {
		addr string
		keys int
		warn bool
	}{
		{"127.0.0.1:8484", 0, false},
		{"[::1]:8484", 0, false},
		{"0.0.0.0:8484", 0, true},
		{"[::]:8484", 0, true},
		{"192.0.2.10:8484", 0, true},
		{"0.0.0.0:8484", 1, false},
	} {
		addr, _ := net.ResolveTCPAddr("tcp", tc.addr)
		msg := exposureWarning(addr, tc.keys)
		if (msg != "") != tc.warn || tc.warn && !strings.Contains(msg, "auth.keys") {
			t.Errorf("exposureWarning(%s, %d keys) = %q", tc.addr, tc.keys, msg)
		}
	}
}
