// Package upstreamerr says what a failed round trip to an upstream was:
// the status and stable code ctxpress answers with, whether the pooled
// connection was stale (safe to send again), and a reason the client can
// read that names no address and nothing of the request.
package upstreamerr

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/valyala/fasthttp"
)

// ErrIdleTimeout cuts a stream whose upstream sent nothing for the idle
// timeout.
var ErrIdleTimeout = errors.New("upstream stream idle timeout")

// Error codes in ctxpress's own error replies, stable for scripts that
// match them.
const (
	CodeUnreachable = "upstream_unreachable"
	CodeTimeout     = "upstream_timeout"
)

// Fault maps an error of the upstream round trip to the status and code
// ctxpress answers with: a timeout is 504, anything else (refused, reset,
// closed, DNS) is 502.
func Fault(err error) (status int, code string) {
	if IsTimeout(err) {
		return fasthttp.StatusGatewayTimeout, CodeTimeout
	}
	return fasthttp.StatusBadGateway, CodeUnreachable
}

// IsTimeout reports whether err is any of the timeout errors fasthttp, the
// net package or a deadline can produce.
func IsTimeout(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrIdleTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IsStaleConn reports whether err is what a pooled keep-alive connection
// that the upstream had already closed produces: the request was not
// answered, so sending it again on a fresh connection is safe.
func IsStaleConn(err error) bool {
	return errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Describe is the client-facing reason: which side failed and how,
// without addresses or anything from the request.
func Describe(err error) string {
	switch {
	case IsTimeout(err):
		return "timed out waiting for the upstream"
	case errors.Is(err, io.ErrUnexpectedEOF), IsStaleConn(err):
		return "upstream closed the connection"
	default:
		var op *net.OpError
		var cert *tls.CertificateVerificationError
		var record tls.RecordHeaderError
		switch {
		case errors.As(err, &cert):
			// A private CA is trusted through SSL_CERT_FILE or SSL_CERT_DIR.
			return "the upstream's TLS certificate is not trusted: " + cert.Err.Error()
		case errors.As(err, &record):
			return "the upstream does not speak TLS (an http:// upstream?)"
		case errors.As(err, &op) && op.Op == "dial":
			return "cannot connect to the upstream"
		}
		return "upstream unreachable"
	}
}
