//go:build !linux

package proxy

import "net"

// peerClosed is not implemented off Linux: a client that leaves during a
// quiet stream is noticed at the next write, or by the idle timeout.
func peerClosed(net.Conn) bool { return false }
