//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"net"
	"syscall"
)

// peerClosed reports whether the client closed its side of conn, without
// consuming any byte: a non-blocking MSG_PEEK read returning 0 means EOF.
// It lets a relay blocked on a quiet upstream notice a client that left.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err == syscall.ECONNRESET
		return true
	})
	return closed
}
