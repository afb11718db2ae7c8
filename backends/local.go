package backends

import (
	"context"
	"sync"
	"time"
)

// local is the seeds' InMemoryLock: a mutex inside each application
// instance. Clients of one instance exclude each other; clients of two
// instances both get in. It is a known-unsafe control: the checker must
// report violations for it whenever two instances compete for a key.
func init() {
	Register(Info{Name: "local",
		Doc: Doc{
			Servers: "none",
			Models:  "control: the seeds' `InMemoryLock`, one mutex table per instance",
			Token:   "none",
			Lost:    "none",
			Options: "none"},
		Paused:  Paused{Shows: PauseKept, For: 3 * time.Second},
		Summary: "control: in-memory lock per instance (two instances both get in)", Unsafe: true, New: func(decode Decoder) (Backend, error) {
			var none struct{}
			if err := decode(&none); err != nil {
				return nil, err
			}
			return localBackend{}, nil
		}})
}

type localBackend struct{}

func (localBackend) Servers() []ServerSpec { return nil }
func (localBackend) Fenced() bool          { return false }

// Open returns the instance's one lock table: all clients of an instance
// share it, clients of different instances never do.
func (localBackend) Open(_ context.Context, env Env) (Locker, error) {
	v, err := env.Shared.Get("local", func() (any, func() error, error) {
		return &localLocker{held: map[string]bool{}}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*localLocker), nil
}

type localLocker struct {
	mu   sync.Mutex
	held map[string]bool
}

type localLease struct{ key string }

func (l localLease) Key() string         { return l.key }
func (localLease) Token() uint64         { return 0 }
func (localLease) Lost() <-chan struct{} { return nil }

func (l *localLocker) Acquire(_ context.Context, key string) (Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] {
		return nil, ErrNotAcquired
	}
	l.held[key] = true
	return localLease{key}, nil
}

func (l *localLocker) Release(_ context.Context, lease Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held[lease.Key()] {
		return ErrNotHeld
	}
	delete(l.held, lease.Key())
	return nil
}

func (l *localLocker) Close() error { return nil }
