package state

import "errors"

// Errors returned by the stores. They are wrapped with context (the path, the
// key); test for them with errors.Is. Failures of the operating system (file
// permissions, a missing file on a read-only open) wrap the *fs.PathError, so
// errors.Is(err, fs.ErrPermission) and errors.Is(err, fs.ErrNotExist) work too.
var (
	// ErrNotDatabase is returned by OpenBolt when the path is not a ctxpress
	// database: a directory, a file that is not bbolt (garbage, truncated or
	// corrupt), or a bbolt file written by another program.
	ErrNotDatabase = errors.New("not a ctxpress database")

	// ErrSchemaTooNew is returned by OpenBolt when the database was written by a
	// newer ctxpress whose schema this binary does not understand.
	ErrSchemaTooNew = errors.New("database schema is newer than this ctxpress")

	// ErrLocked is returned by OpenBolt when the file stays locked beyond
	// BoltOptions.Timeout: another process (or another open in this one)
	// holds it for writing, or, for a writing open, holds it at all.
	ErrLocked = errors.New("database is locked by another process")

	// ErrReadOnly is returned by Update, Delete and Sweep on a store opened with
	// BoltOptions.ReadOnly.
	ErrReadOnly = errors.New("database is opened read-only")

	// ErrClosed is returned by every method of a store after Close.
	ErrClosed = errors.New("store is closed")

	// ErrInvalidKey is returned when a Key has an empty or malformed namespace,
	// or an empty id or one longer than MaxIDLen bytes.
	ErrInvalidKey = errors.New("invalid conversation key")

	// ErrCorrupt is returned by Get when the stored record cannot be decoded,
	// and by every method of a bolt store once bbolt has failed on a file
	// corrupted while open.
	ErrCorrupt = errors.New("corrupt stored data")
)
