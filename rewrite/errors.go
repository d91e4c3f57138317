package rewrite

import "errors"

// ErrInvalidJSON is returned for a body that is not valid JSON.
var ErrInvalidJSON = errors.New("rewrite: body is not valid JSON")

// ErrNotChat is returned for JSON that is not a chat request: not an object
// with a `messages` array.
var ErrNotChat = errors.New("rewrite: body is not a chat request")

// ErrBadConfig is wrapped by the errors of the Validate methods.
var ErrBadConfig = errors.New("invalid config")
