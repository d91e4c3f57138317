package state

import "time"

// Leaser hands out named leases that exclude each other across every
// process sharing the store: the Redis store is one, so that replicas
// behind a load balancer compact a conversation branch once between them.
// A per-process store (bolt, memory) needs none; the proxy's own lock
// excludes within one process.
type Leaser interface {
	// Acquire takes the lease name for ttl, renewed while held (every
	// ttl/3) until Release, so it lasts as long as its holder lives and no
	// longer than ttl after it dies. ok is false when another holder has
	// it. An error says the store could not tell; the caller decides
	// whether to go on without it.
	Acquire(name string, ttl time.Duration) (l Lease, ok bool, err error)
}

// Lease is one held lease.
type Lease interface {
	// Renew extends the lease by its ttl; held is false when it is no
	// longer this holder's (it expired, and perhaps another took it).
	Renew() (held bool, err error)
	// Release stops the renewal and gives the lease up, if it is still
	// this holder's: never another's that took it after it expired.
	Release() error
}
