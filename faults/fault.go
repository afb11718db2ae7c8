// Package faults holds the failures lockbench injects, one small type per
// fault, each registered by name with a constructor that decodes its own
// options strictly.
//
// A fault is started on a concrete target and returns a Heal function; the
// runner records the window between a successful Start and the end of Heal
// as the time the fault was really in effect (faults.jsonl, and fault marks
// in the history). A fault that cannot be applied is reported, never
// skipped: the run is then invalid.
//
// Targets are named in scenario files as:
//
//	instance-N      worker instance N (an application replica, its own process)
//	<server>        a server of the case's cluster, e.g. redis-1
//	link:<server>   the client->server link of a server, through toxiproxy
//	link:<server>@instance-N  the same link for one instance only
//	link:resource   the clients' link to the protected resource
//
// Roles are resolved at the moment of injection, because the interesting
// faults hit whoever holds the lock or leads the cluster right then:
//
//	holder          the instance of a client inside its critical section
//	holder-of:<key> the same, for one key (k0, k1, ...)
//	a-waiter        the instance of a client waiting for a lock
//	leader          the current leader (etcd, Consul, ZooKeeper) or master (Sentinel)
//	master          the current Redis master as the Sentinels see it
package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// Kind is a kind of target.
type Kind string

// The target kinds.
const (
	Link     Kind = "link"
	Instance Kind = "instance"
	Server   Kind = "server"
)

// The role targets.
const (
	RoleHolder   = "holder"
	RoleHolderOf = "holder-of:" // followed by a key
	RoleWaiter   = "a-waiter"
	RoleLeader   = "leader"
	RoleMaster   = "master"
)

// IsRole reports whether target is a role rather than a name.
func IsRole(target string) bool {
	switch target {
	case RoleHolder, RoleWaiter, RoleLeader, RoleMaster:
		return true
	}
	return strings.HasPrefix(target, RoleHolderOf)
}

// KindOf classifies a concrete or role target name.
func KindOf(target string) Kind {
	switch {
	case strings.HasPrefix(target, "link:"):
		return Link
	case strings.HasPrefix(target, "instance-"), target == RoleHolder, target == RoleWaiter, strings.HasPrefix(target, RoleHolderOf):
		return Instance
	default:
		return Server
	}
}

// Env is what a fault can act on: the running case.
type Env interface {
	// Link returns the toxiproxy proxy of a link ("redis-1", "resource").
	Link(name string) (*toxiclient.Proxy, error)
	// Signal sends sig to an instance ("instance-2") or a server's process
	// group.
	Signal(target string, sig syscall.Signal) error
	// Kill SIGKILLs an instance or a server.
	Kill(target string) error
	// Restart starts a killed server again, with its data directory and
	// persistence mode, and waits until it answers.
	Restart(ctx context.Context, server string) error
	// Server returns a server's real address (not its proxy) and kind.
	Server(name string) (addr, kind string, err error)
	// Peers lists the other members of a server's cluster.
	Peers(name string) []string
	// Cut drops the packets from one server to another (one direction),
	// below TCP: TCP and UDP alike.
	Cut(from, to string) (undo func() error, err error)
}

// Heal undoes a fault.
type Heal func(ctx context.Context) error

// Fault is one configured failure.
type Fault interface {
	// Start applies the fault to target (a concrete name, never a role) and
	// returns how to undo it.
	Start(ctx context.Context, env Env, target string) (Heal, error)
}

// Decoder decodes a fault's options into v, rejecting unknown fields.
type Decoder func(v any) error

// Info describes a registered fault type.
type Info struct {
	Name    string
	Summary string
	Targets []Kind // the kinds of target it applies to
	// Instant faults happen at one moment (a kill, a clock jump): their
	// window may be zero.
	Instant bool
	// Emulated says how the fault is emulated rather than real; reports
	// repeat it.
	Emulated string
	// NeedsFirewall marks faults made with iptables: they need root and
	// servers that use their own address as source.
	NeedsFirewall bool
	New           func(decode Decoder) (Fault, error)
}

// Accepts reports whether the fault applies to targets of kind k.
func (i Info) Accepts(k Kind) bool {
	for _, t := range i.Targets {
		if t == k {
			return true
		}
	}
	return false
}

var (
	regMu    sync.RWMutex
	registry = map[string]Info{}
)

// Register adds a fault type; it panics on a duplicate or incomplete entry.
func Register(info Info) {
	regMu.Lock()
	defer regMu.Unlock()
	if info.Name == "" || info.New == nil || len(info.Targets) == 0 {
		panic("faults: Register with empty name, nil constructor or no targets")
	}
	if _, dup := registry[info.Name]; dup {
		panic("faults: duplicate fault " + info.Name)
	}
	registry[info.Name] = info
}

// Lookup returns the fault type registered under name.
func Lookup(name string) (Info, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	info, ok := registry[name]
	if !ok {
		return Info{}, fmt.Errorf("unknown fault type %q (known: %s)", name, strings.Join(namesLocked(), ", "))
	}
	return info, nil
}

// All lists the registered fault types sorted by name.
func All() []Info {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []Info
	for _, n := range namesLocked() {
		out = append(out, registry[n])
	}
	return out
}

func namesLocked() []string {
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Named is implemented by faults whose options name more servers (the
// other side of a split); the scenario checks that they exist.
type Named interface {
	Names() []string
}

// linkName strips the "link:" prefix.
func linkName(target string) string { return strings.TrimPrefix(target, "link:") }
