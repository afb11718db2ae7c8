// Package backends holds the lock algorithms lockbench compares, one file
// per algorithm, each registered by name.
//
// A backend has two sides. On the coordinator side, a Backend says which
// servers its cluster needs and whether it issues fencing tokens. Inside a
// worker process, Open returns the Locker of one client. What the clients of
// one application instance share (a connection pool, an in-memory lock
// table, a ZooKeeper session) lives in Env.Shared, created once per
// instance; what must be private to a client (an etcd session, a pinned
// PostgreSQL connection) lives in its Locker.
//
// Locker is deliberately small (context first; acquire, release, close).
// Abilities that only some algorithms have are separate interfaces found by
// type assertion: Extender for leases that can be extended. A lease's
// fencing token and its "lost" signal are part of Lease, with zero values
// (token 0, nil channel) meaning the algorithm has none.
package backends

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/internal/config"
)

// ErrNotAcquired means the lock is held by someone else: the attempt
// certainly did not take effect. Any other error from Acquire leaves the
// outcome unknown.
var ErrNotAcquired = errors.New("lock is held by another client")

// ErrNotHeld means a release or extension was refused because the lease is
// no longer the caller's (it expired and maybe someone else holds it now).
var ErrNotHeld = errors.New("lock is no longer held by this client")

// ErrNotSent means the request was surely never sent: the dial was refused
// before a byte of it was written, or the client's own check refused it.
// It surely did not take effect, and the service said nothing: the
// history's unsent (checker/MODEL.md §0 A1), no claim about the grant
// either way. Return it (wrapped) only where that is certain; a request
// that may have left the process is an unknown outcome.
var ErrNotSent = errors.New("request not sent")

// Lease is one successful acquisition.
type Lease interface {
	Key() string
	// Token is the fencing token of this acquisition, strictly greater than
	// every earlier holder's when the algorithm provides one; 0 if it has
	// none.
	Token() uint64
	// Lost is closed when the client library knows the lease is lost (its
	// validity ran out, an extension failed, the session expired). Nil if
	// the algorithm never signals it.
	Lost() <-chan struct{}
}

// Locker acquires and releases locks for one client. A client holds at most
// one lease at a time and calls its Locker from one goroutine, but a lease's
// Lost channel and an Extender may be used from others.
type Locker interface {
	// Acquire tries to take the lock on key, waiting at most until ctx is
	// done. It returns ErrNotAcquired when the lock is certainly held by
	// someone else; the caller retries with backoff.
	Acquire(ctx context.Context, key string) (Lease, error)
	// Release gives the lease back. It returns ErrNotHeld when the lock was
	// no longer this lease's, which a safe algorithm detects instead of
	// removing somebody else's lock.
	Release(ctx context.Context, l Lease) error
	// Close releases the client's own resources (not the Shared ones).
	Close() error
}

// Extender is implemented by Lockers whose leases can be extended.
type Extender interface {
	// Extend pushes the lease's expiry out by its TTL. ErrNotHeld means the
	// lease is already lost.
	Extend(ctx context.Context, l Lease) error
}

// Forger is implemented by Lockers that can build a lease for a key that is
// not the caller's (a wrong token), to test how a release with it is
// treated: a safe algorithm refuses it, an unsafe one removes the lock.
type Forger interface {
	Forge(key string) Lease
}

// ServerSpec is one server a backend's cluster needs.
type ServerSpec struct {
	Kind string // "redis"
	Name string // unique in the cluster: "redis-1"
	// Persistence of a Redis server: "none", "everysec" or "always".
	Persistence string
	// Args are extra command-line arguments for the server.
	Args []string
	// Settings are kind-specific settings (etcd timings, ZooKeeper tick
	// time, PostgreSQL parameters), by name.
	Settings map[string]string
}

// Env is what a worker needs to reach the cluster.
type Env struct {
	// Endpoints maps a server name to its real address. Clients dial it
	// through Dial, which routes it (directly, or through the proxy of a
	// link fault), so a client given an address at run time (by a
	// Sentinel) is routed the same way.
	Endpoints map[string]string
	// Dial connects to a real server address; every client library must
	// use it for every connection. Nil means a plain dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TTL is the lease time of the scenario's workload.
	TTL time.Duration
	// Instance is the worker instance number (1-based), Client the client
	// number inside it (0-based).
	Instance, Client int
	// Shared holds what the clients of one instance share.
	Shared *Shared
	// Auth holds, per credential family ("redis", "etcd", ...: each
	// server kind declares its own, internal/cluster's Kind.Credentials),
	// how to authenticate to servers lockbench did not start.
	Auth map[string]*Credentials
}

// Credentials returns the credentials of a family, or nil for none.
func (e Env) Credentials(family string) *Credentials {
	return e.Auth[family]
}

// Dialer returns Dial, or a plain dialer when it is nil.
func (e Env) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if e.Dial != nil {
		return e.Dial
	}
	var d net.Dialer
	return d.DialContext
}

// Shared holds resources that the clients of one instance share, created
// by the first client that asks and closed when the instance ends.
type Shared struct {
	mu      sync.Mutex
	vals    map[string]any
	closers []func() error
}

// NewShared returns an empty Shared.
func NewShared() *Shared { return &Shared{vals: map[string]any{}} }

// Get returns the value stored under key, creating it with make the first
// time. make returns the value and how to close it (nil if nothing to do).
func (s *Shared) Get(key string, make func() (any, func() error, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vals[key]; ok {
		return v, nil
	}
	v, closer, err := make()
	if err != nil {
		return nil, err
	}
	s.vals[key] = v
	if closer != nil {
		s.closers = append(s.closers, closer)
	}
	return v, nil
}

// Close closes every shared resource, newest first.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Backend is a configured algorithm.
type Backend interface {
	// Servers lists the servers its cluster needs (none for in-process
	// controls such as "local").
	Servers() []ServerSpec
	// Fenced reports whether leases carry fencing tokens.
	Fenced() bool
	// Open connects one client of a worker instance to the cluster.
	Open(ctx context.Context, env Env) (Locker, error)
}

// Leaser is implemented by backends whose locks are leases: LeaseTime is
// how long a grant lasts on the server unless it is extended (or renewed in
// the background), given the workload's ttl. Backends without it have no
// lease: a holder keeps the lock until it releases or its session ends.
type Leaser interface {
	LeaseTime(ttl time.Duration) time.Duration
}

// Renewer is implemented by backends whose client library renews the lease
// in the background (etcd, Consul and ZooKeeper sessions), with no event in
// the history: there the lease bounds a grant's expiry only until its first
// renewal, so the checker cannot date the server's expiry from it.
type Renewer interface {
	RenewsInBackground() bool
}

// RenewsLease reports whether b's library renews its leases unseen.
func RenewsLease(b Backend) bool {
	r, ok := b.(Renewer)
	return ok && r.RenewsInBackground()
}

// LeaseTime returns b's lease for the workload's ttl, or 0 for none.
func LeaseTime(b Backend, ttl time.Duration) time.Duration {
	if l, ok := b.(Leaser); ok {
		return l.LeaseTime(ttl)
	}
	return 0
}

// MemberBound is implemented by backends whose instance keeps one
// connection to one member at a time, moving to another when it fails (a
// ZooKeeper session, a Consul agent, etcd's client with balancer:
// pick-first): OneMember true lets a fault target the member an instance
// is connected to (faults.RoleConnectedMember). A client spreading its
// requests over every member has no such member.
type MemberBound interface {
	OneMember() bool
}

// OneMember reports whether b's instances talk to one member at a time.
func OneMember(b Backend) bool {
	m, ok := b.(MemberBound)
	return ok && m.OneMember()
}

// Router is implemented by backends whose clients do not dial every server
// of the cluster: Dials lists the servers that instance n of instances
// connects to. A fault aimed at a link an instance never uses is rejected
// before the run. Backends without it dial every server.
type Router interface {
	Dials(instance, instances int) []string
}

// Dials lists the servers that instance n's clients of backend b connect to.
func Dials(b Backend, instance, instances int) []string {
	if r, ok := b.(Router); ok {
		return r.Dials(instance, instances)
	}
	var out []string
	for _, s := range b.Servers() {
		out = append(out, s.Name)
	}
	return out
}

// Decoder decodes a backend's options into v, rejecting unknown fields.
type Decoder func(v any) error

// Constructor builds a Backend from its options.
type Constructor func(decode Decoder) (Backend, error)

// LabeledConstructor builds a Backend from the label of its name (see
// SplitName) and its options.
type LabeledConstructor func(label string, decode Decoder) (Backend, error)

// Info describes a registered backend.
type Info struct {
	Name    string
	Summary string
	// Unsafe marks a known-unsafe control that exists to prove the checker
	// catches what it should.
	Unsafe bool
	New    Constructor
	// NewLabeled, when set, builds the backend from a name with a label
	// ("driver:redis-py@4.3.4"): the label says which of the backend's
	// kind a case runs, and the whole name is the case's row. Backends
	// without it refuse a label.
	NewLabeled LabeledConstructor
	// Options is the zero value of the backend's options struct (nil:
	// none): its yaml and doc tags are what `bench list` shows.
	Options any
	// Drivers says a driver may name the backend as its server (the
	// driver backend's server option): the cluster it starts is one a
	// driver's library talks to, every server of a kind that lets drivers
	// talk to it (internal/cluster's Kind.Drivers).
	Drivers bool
	// Doc is what docs/backends.md's table says of the backend.
	Doc Doc
	// Paused is what a holder of the backend must show when it is paused
	// beyond its lease and resumed, or why it is not tried so.
	Paused Paused
}

// Doc is what docs/backends.md's table of backends says of one (each of
// its columns but the name): the servers it needs, what it models, its
// fencing token, its lost signal and its options with their defaults.
type Doc struct {
	Servers, Models, Token, Lost, Options string
}

// Paused is what a holder of a backend shows when it is paused (SIGSTOP,
// as a stop-the-world GC pause would, its lease keep-alives included)
// beyond its lease and resumed: backends/lost_test.go pauses one against
// real servers for every registered backend and holds it to this.
type Paused struct {
	// Shows is what the holder shows once resumed (required, unless
	// Excused): PauseLost or PauseKept.
	Shows PauseShows
	// For is how long the holder is paused (0: 3s), Options the backend's
	// options for the trial (YAML; "": its defaults).
	For     time.Duration
	Options string
	// Excused says why the trial does not pause this backend ("": it
	// does).
	Excused string
}

// PauseShows is what a paused holder shows once resumed.
type PauseShows string

// What a paused holder shows.
const (
	// PauseLost: the lease's Lost channel closes after the resume: the
	// library learned its lease is gone.
	PauseLost PauseShows = "lost"
	// PauseKept: no signal: the lock has no lease to lose (the holder
	// keeps it as long as its session, or holds none at all).
	PauseKept PauseShows = "kept"
)

// DriverServers lists the backends a driver may name as its server
// (Info.Drivers), sorted.
func DriverServers() []string {
	var out []string
	for _, i := range All() {
		if i.Drivers {
			out = append(out, i.Name)
		}
	}
	return out
}

// Option describes one option of a backend.
type Option = config.Option

// OptionList lists a backend's options from the yaml and doc tags of its
// options struct (inline structs flattened), in declaration order.
func (i Info) OptionList() []Option { return config.OptionsOf(i.Options) }

var registry = config.NewRegistry[Info]("backend")

// Register adds a backend. It panics on an empty name, a nil constructor or
// a duplicate, which are programming errors caught at start-up.
func Register(info Info) {
	if info.New == nil {
		panic("backends: Register with a nil constructor")
	}
	registry.Register(info.Name, info)
}

// SplitName splits a backend name into the registered name and its label:
// "driver:redis-py@4.3.4" is backend driver with label "redis-py@4.3.4".
func SplitName(name string) (registered, label string) {
	registered, label, _ = strings.Cut(name, ":")
	return registered, label
}

// Lookup returns the backend registered under name (its label aside).
func Lookup(name string) (Info, error) {
	registered, _ := SplitName(name)
	return registry.Lookup(registered)
}

// New builds the backend registered under name from its options.
func New(name string, decode Decoder) (Backend, error) {
	info, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	var b Backend
	switch _, label := SplitName(name); {
	case label == "" && strings.Contains(name, ":"):
		return nil, fmt.Errorf("backend %q: an empty label after the colon", name)
	case label == "":
		b, err = info.New(decode)
	case info.NewLabeled == nil:
		return nil, fmt.Errorf("backend %s takes no label (%q)", info.Name, name)
	default:
		b, err = info.NewLabeled(label, decode)
	}
	if err != nil {
		return nil, fmt.Errorf("backend %s options: %w", name, err)
	}
	return b, nil
}

// All returns every registered backend, sorted by name.
func All() []Info { return registry.All() }
