package backends

// Breakable is implemented by Lockers whose client can break beyond
// repair: a driver process (package backends/driver) that crashed, hung or
// wrote a line the protocol does not allow. Every result after that would
// be meaningless, so the worker ends its instance with Err, and the case
// is invalid, saying why.
type Breakable interface {
	// Broken is closed once the client is broken.
	Broken() <-chan struct{}
	// Err says why; nil while Broken is open.
	Err() error
}

// Extendable is implemented by backends that know, before any client is
// opened, whether their Lockers can extend a lease (a driver declares it):
// validation refuses a workload that extends on one that cannot.
type Extendable interface {
	CanExtend() bool
}

// CanExtend reports whether b's Lockers can extend leases, when b says so
// before any client is opened; ok is false when b does not say.
func CanExtend(b Backend) (can, ok bool) {
	e, ok := b.(Extendable)
	if !ok {
		return false, false
	}
	return e.CanExtend(), true
}
