//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proxy

import "net"

// peerClosed is not implemented here (Windows, Plan 9): a client that leaves during a
// quiet stream is noticed at the next write, or by the idle timeout.
func peerClosed(net.Conn) bool { return false }
