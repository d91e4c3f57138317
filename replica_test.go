package main

import "testing"

func TestReplicaNameIsTheOptionElseHostAndListenPort(t *testing.T) {
	for _, c := range []struct {
		replica, hostname, listen, want string
	}{
		{"gw-1", "vm", "127.0.0.1:8484", "gw-1"}, // the option wins
		{"", "vm", "127.0.0.1:8484", "vm:8484"},  // two replicas on one host differ by port
		{"", "vm", "[::]:9000", "vm:9000"},       // any listen address
		{"", "vm", "not an address", "vm"},       // no port to tell: the host
		{"", "", "127.0.0.1:8484", ""},           // no hostname: the proxy's default
	} {
		if got := replicaName(c.replica, c.hostname, c.listen); got != c.want {
			t.Errorf("replicaName(%q, %q, %q) = %q, want %q", c.replica, c.hostname, c.listen, got, c.want)
		}
	}
}
