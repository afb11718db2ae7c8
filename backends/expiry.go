package backends

import "time"

// ExpiryBounder is implemented by backends whose service may keep a dead or
// silent holder's grant longer than its lease: ExpiryBound is the longest,
// by the lock's own design, given the workload's ttl. After a fault heals
// the lock is due back within it (checker/MODEL.md §11), and the checker
// waits that long before it calls a lock that did not serve again "not
// live".
type ExpiryBounder interface {
	ExpiryBound(ttl time.Duration) time.Duration
}

// ExpiryBound returns b's expiry bound for the workload's ttl: its own
// when it says, else its lease (0 for a lock without one: a dead holder's
// grant ends with its session at once, or never, and there is nothing to
// wait for).
func ExpiryBound(b Backend, ttl time.Duration) time.Duration {
	if e, ok := b.(ExpiryBounder); ok {
		return e.ExpiryBound(ttl)
	}
	return LeaseTime(b, ttl)
}

// Cycler is implemented by backends whose lock runs a cycle of its own
// that a fault's effect depends on: Cycle is its period, given the
// workload's ttl (a keep-alive or renewal period when a library renews
// the lease in the background). Trials of one row spread their faults
// over it (internal/scenario: each trial an independent draw).
type Cycler interface {
	Cycle(ttl time.Duration) time.Duration
}

// Cycle returns b's cycle for the workload's ttl: its own when it says,
// else its lease (where in a grant's lease a fault lands), 0 for a lock
// without one.
func Cycle(b Backend, ttl time.Duration) time.Duration {
	if c, ok := b.(Cycler); ok {
		return c.Cycle(ttl)
	}
	return LeaseTime(b, ttl)
}
