package compactor

import "errors"

// ErrNothingToSummarise is for callers whose Cut reported ok=false: no message
// can be summarised under the cut rules.
var ErrNothingToSummarise = errors.New("compactor: nothing to summarise")

// ErrEmptySummary means the summariser answered without any summary text.
var ErrEmptySummary = errors.New("compactor: empty summary")

// ErrUpstream means the summary upstream answered with a non-2xx status.
var ErrUpstream = errors.New("compactor: summary upstream error")

// ErrTransport means the summary call did not complete (dial, reset, timeout, cancelled context).
var ErrTransport = errors.New("compactor: summary call failed")

// ErrBadResponse means the summary upstream's 2xx answer is not a chat completion ctxpress can read.
var ErrBadResponse = errors.New("compactor: unreadable summary response")

// ErrInvalidChat means a chat request would be refused by a strict server (see ValidateChat).
var ErrInvalidChat = errors.New("compactor: invalid chat request")

// ErrContextOverflow means the summary upstream refused the summary request
// as longer than its context window (it also wraps ErrUpstream).
var ErrContextOverflow = errors.New("compactor: summary request exceeds the summariser's context window")
