package backends

import "context"

// WithKeyPrefix makes every key a Locker (and its Store) uses start with
// prefix, while the leases it returns still name the key as the caller
// gave it: runs against a cluster lockbench did not start (bench run
// -targets) keep their locks, counters and rows apart from every other
// run's and from the cluster's own data.
func WithKeyPrefix(l Locker, prefix string) Locker {
	if prefix == "" {
		return l
	}
	p := &prefixed{l: l, prefix: prefix}
	ext, hasExt := l.(Extender)
	st, hasSt := l.(Store)
	f, hasF := l.(Forger)
	e, s, g := prefixedExt{p, ext}, prefixedStore{p, st}, prefixedForge{p, f}
	// The optional abilities are found by type assertion, so the wrapper
	// must have exactly those of the Locker it wraps.
	switch {
	case hasExt && hasSt && hasF:
		return &struct {
			*prefixed
			prefixedExt
			prefixedStore
			prefixedForge
		}{p, e, s, g}
	case hasExt && hasSt:
		return &struct {
			*prefixed
			prefixedExt
			prefixedStore
		}{p, e, s}
	case hasExt && hasF:
		return &struct {
			*prefixed
			prefixedExt
			prefixedForge
		}{p, e, g}
	case hasSt && hasF:
		return &struct {
			*prefixed
			prefixedStore
			prefixedForge
		}{p, s, g}
	case hasExt:
		return &struct {
			*prefixed
			prefixedExt
		}{p, e}
	case hasSt:
		return &struct {
			*prefixed
			prefixedStore
		}{p, s}
	case hasF:
		return &struct {
			*prefixed
			prefixedForge
		}{p, g}
	}
	return p
}

type prefixed struct {
	l      Locker
	prefix string
}

// prefixedLease is a lease on prefix+key that names key.
type prefixedLease struct {
	Lease
	key string
}

func (l *prefixedLease) Key() string { return l.key }

func unwrap(l Lease) Lease {
	if p, ok := l.(*prefixedLease); ok {
		return p.Lease
	}
	return l
}

func (p *prefixed) Acquire(ctx context.Context, key string) (Lease, error) {
	l, err := p.l.Acquire(ctx, p.prefix+key)
	if err != nil {
		return nil, err
	}
	return &prefixedLease{Lease: l, key: key}, nil
}

func (p *prefixed) Release(ctx context.Context, l Lease) error { return p.l.Release(ctx, unwrap(l)) }
func (p *prefixed) Close() error                               { return p.l.Close() }

type prefixedExt struct {
	p   *prefixed
	ext Extender
}

func (e prefixedExt) Extend(ctx context.Context, l Lease) error { return e.ext.Extend(ctx, unwrap(l)) }

type prefixedStore struct {
	p  *prefixed
	st Store
}

func (s prefixedStore) Work(ctx context.Context, l Lease, hold func() bool) (bool, error) {
	return s.st.Work(ctx, unwrap(l), hold)
}

type prefixedForge struct {
	p *prefixed
	f Forger
}

func (f prefixedForge) Forge(key string) Lease {
	return &prefixedLease{Lease: f.f.Forge(f.p.prefix + key), key: key}
}
