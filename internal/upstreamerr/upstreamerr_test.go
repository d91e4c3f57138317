package upstreamerr

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestFault(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
	}{
		{fasthttp.ErrTimeout, 504},
		{fasthttp.ErrDialTimeout, 504},
		{fmt.Errorf("read: %w", os.ErrDeadlineExceeded), 504},
		{ErrIdleTimeout, 504},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, 502},
		{syscall.ECONNRESET, 502},
		{fasthttp.ErrConnectionClosed, 502},
		{io.ErrUnexpectedEOF, 502},
		{errors.New("no such host"), 502},
	} {
		if got, _ := Fault(tc.err); got != tc.status {
			t.Errorf("Fault(%v) = %d, want %d", tc.err, got, tc.status)
		}
	}
}

// A stale pooled connection may be sent again; a refusal or a timeout
// may not (the upstream may have the request).
func TestIsStaleConn(t *testing.T) {
	for _, tc := range []struct {
		err   error
		stale bool
	}{
		{fasthttp.ErrConnectionClosed, true},
		{fmt.Errorf("read: %w", io.EOF), true},
		{syscall.ECONNRESET, true},
		{syscall.EPIPE, true},
		{fasthttp.ErrTimeout, false},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
	} {
		if got := IsStaleConn(tc.err); got != tc.stale {
			t.Errorf("IsStaleConn(%v) = %v, want %v", tc.err, got, tc.stale)
		}
	}
}

// The client reads which side failed and how, never an address.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fasthttp.ErrTimeout, "timed out waiting for the upstream"},
		{io.ErrUnexpectedEOF, "upstream closed the connection"},
		{&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 443}, Err: syscall.ECONNREFUSED}, "cannot connect to the upstream"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "the upstream does not speak TLS (an http:// upstream?)"},
		{errors.New("no such host 10.1.2.3"), "upstream unreachable"},
	} {
		if got := Describe(tc.err); got != tc.want {
			t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
