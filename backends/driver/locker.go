package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// lease is one acquisition a driver granted.
type lease struct {
	p        *Process
	client   int
	key, id  string
	token    uint64
	lost     chan struct{}
	lostOnce sync.Once
	released bool // under p.mu: the client gave it back (a late lost is no news)
}

func (l *lease) Key() string   { return l.key }
func (l *lease) Token() uint64 { return l.token }

// Lost is closed when the driver says the lease is gone; nil for a driver
// without a lost signal.
func (l *lease) Lost() <-chan struct{} {
	if !l.p.Abilities().Lost {
		return nil
	}
	return l.lost
}

func (l *lease) markLost() {
	if l.lost == nil {
		return
	}
	l.lostOnce.Do(func() { close(l.lost) })
}

// OpError is a driver's error answer to an operation.
type OpError struct {
	Driver, Op, Key string
	Code, Message   string
	// Definite: the driver said the operation surely did not take effect;
	// Unsent: it was never sent.
	Definite, Unsent bool
}

func (e *OpError) Error() string {
	effect := "it may have taken effect"
	switch {
	case e.Unsent:
		effect = "it was never sent"
	case e.Definite:
		effect = "it did not take effect"
	}
	msg := e.Code
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return fmt.Sprintf("%s %s %s: %s (%s)", e.Driver, e.Op, e.Key, msg, effect)
}

// Is maps a driver's answer to the outcomes of checker/MODEL.md §0 A1:
// a definite acquire failure is backends.ErrNotAcquired (the attempt
// certainly did not take effect: fail), a not_held answer
// backends.ErrNotHeld (the service says the grant was not the caller's:
// fail), an operation never sent backends.ErrNotSent (unsent). So is a
// release or extension that surely did not take effect for another reason
// than not_held: the driver says it had no effect, and nothing was said of
// the grant — not unknown, which would credit it with a possible renewal.
// Every other failure's outcome is unknown.
func (e *OpError) Is(target error) bool {
	switch target {
	case backends.ErrNotAcquired:
		return e.Op == TypeAcquire && e.Definite && !e.Unsent
	case backends.ErrNotHeld:
		return e.Code == CodeNotHeld
	case backends.ErrNotSent:
		return e.Unsent || (e.Op != TypeAcquire && e.Definite && e.Code != CodeNotHeld)
	}
	return false
}

// locker is one client's Locker on a driver process, which it may share
// with the other clients of its instance.
type locker struct {
	p      *Process
	client int
	wait   bool
	ttl    time.Duration
	own    bool // the process is this client's alone: Close ends it
}

// extLocker is a locker whose driver can extend leases.
type extLocker struct{ *locker }

func newLocker(p *Process, client int, wait bool, ttl time.Duration, own bool) backends.Locker {
	l := &locker{p: p, client: client, wait: wait, ttl: ttl, own: own}
	if p.Abilities().Extend {
		return &extLocker{l}
	}
	return l
}

func (l *locker) opError(op, key string, r Reply) error {
	return &OpError{Driver: l.p.Name(), Op: op, Key: key, Code: r.Code, Message: l.p.redact.Redact(r.Message), Definite: r.Definite(), Unsent: r.Unsent()}
}

func (l *locker) Acquire(ctx context.Context, key string) (backends.Lease, error) {
	a, err := l.p.call(ctx, Request{Type: TypeAcquire, Client: l.client, Key: key, Wait: l.wait})
	if err != nil {
		return nil, fmt.Errorf("%s acquire %s: %w", l.p.Name(), key, err)
	}
	if a.reply.Type == TypeError {
		return nil, l.opError(TypeAcquire, key, a.reply)
	}
	return a.lease, nil
}

func (l *locker) lease(op string, bl backends.Lease) (*lease, error) {
	ls, ok := bl.(*lease)
	if !ok || ls.p != l.p || ls.client != l.client {
		return nil, fmt.Errorf("%s %s: the lease (%T) is not this client's", l.p.Name(), op, bl)
	}
	return ls, nil
}

func (l *locker) Release(ctx context.Context, bl backends.Lease) error {
	ls, err := l.lease(TypeRelease, bl)
	if err != nil {
		return err
	}
	a, err := l.p.call(ctx, Request{Type: TypeRelease, Client: l.client, Lease: ls.id})
	// Whatever the answer, the client is done with the lease.
	l.p.mu.Lock()
	ls.released = true
	l.p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s release %s: %w", l.p.Name(), ls.key, err)
	}
	if a.reply.Type == TypeError {
		return l.opError(TypeRelease, ls.key, a.reply)
	}
	return nil
}

func (l *extLocker) Extend(ctx context.Context, bl backends.Lease) error {
	ls, err := l.lease(TypeExtend, bl)
	if err != nil {
		return err
	}
	a, err := l.p.call(ctx, Request{Type: TypeExtend, Client: l.client, Lease: ls.id, TTLMs: l.ttl.Milliseconds()})
	if err != nil {
		return fmt.Errorf("%s extend %s: %w", l.p.Name(), ls.key, err)
	}
	if a.reply.Type == TypeError {
		return l.opError(TypeExtend, ls.key, a.reply)
	}
	return nil
}

// Close ends the driver when it is this client's alone; a shared one ends
// with its instance (backends.Shared).
func (l *locker) Close() error {
	if l.own {
		return l.p.Close()
	}
	return nil
}

func (l *locker) process() *Process { return l.p }

// Broken and Err make a driver's breakage the worker's to act on.
func (l *locker) Broken() <-chan struct{} { return l.p.Broken() }
func (l *locker) Err() error              { return l.p.Err() }

var (
	_ backends.Locker    = (*locker)(nil)
	_ backends.Extender  = (*extLocker)(nil)
	_ backends.Breakable = (*locker)(nil)
	_ backends.Lease     = (*lease)(nil)
)
