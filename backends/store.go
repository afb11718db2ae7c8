package backends

import (
	"context"
	"errors"
)

// The alternatives the seeds say to weigh before a distributed lock keep
// the protected data in the database that also does the concurrency
// control: a row locked FOR UPDATE with the work in the same transaction,
// or no lock at all and a versioned compare-and-set (optimistic
// concurrency). Their critical section cannot go to the harness's
// resource (a write there could never be part of the database's
// transaction), so it goes to the database, through Store, and the proof
// that no update was lost comes from the database itself: after every
// client stopped, the coordinator reads each key's counter through
// Verifier, and the checker compares it with the increments the history
// says were committed.

// ErrConflict means a compare-and-set found the data changed since it was
// read: nothing was written (optimistic concurrency's retry signal).
var ErrConflict = errors.New("the data changed since it was read: nothing written")

// Store is implemented by Lockers whose critical section runs in their own
// database: Work reads the key's counter, calls hold (the work; false when
// it was cut short, and then nothing is written), and writes the counter
// plus one, in the lease's transaction or with a compare-and-set. It
// reports whether it wrote. The write is committed when the Release that
// follows returns nil (at once, for a compare-and-set). ErrConflict:
// nothing was written. Any other error: unknown.
type Store interface {
	Work(ctx context.Context, l Lease, hold func() bool) (bool, error)
}

// Lockless is implemented by Backends that take no lock at all (their
// Acquire always succeeds at once): overlapping "holds" are their normal
// state, not a violation, and safety is only what their Store proves.
type Lockless interface {
	Lockless() bool
}

// IsLockless reports whether b takes no lock.
func IsLockless(b Backend) bool {
	l, ok := b.(Lockless)
	return ok && l.Lockless()
}

// Verifier is implemented by Backends whose Lockers are Stores: Totals
// reads every key's counter, once every client has stopped. env holds the
// servers' addresses (dialled directly, from the coordinator).
type Verifier interface {
	Totals(ctx context.Context, env Env) (map[string]int64, error)
}
