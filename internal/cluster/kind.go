package cluster

import (
	"context"
	"slices"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/config"
)

// Kind is everything the harness knows of one kind of server (a backend's
// ServerSpec.Kind), registered by the kind's own file (redis.go is the
// shape to follow): adding a server kind is that file and its backend.
type Kind struct {
	Name string
	// Start launches every server of the kind in specs at once (an
	// ensemble needs every member's address before any member starts),
	// each through c.newServer and c.launch, and returns once each is
	// healthy and proven to be this run's.
	Start func(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error
	// Binary finds the kind's executable, or says how to install it
	// (wrapping ErrMissingBinary).
	Binary func() (string, error)
	// Version is the installed version's banner (run.json's versions).
	Version func() string
	// Short trims Version's banner to a name and a number ("redis
	// 7.0.15"), for tables; nil keeps the banner.
	Short func(banner string) string
	// Leader, for a kind with a leader or master role, names the server
	// leading now; live holds the cluster's live servers by kind. Nil for
	// a kind without one.
	Leader func(ctx context.Context, live map[string][]*Server) (string, error)
	// Links names the server-side links the kind's Start routes (through
	// c.routed) for specs: links between servers that link faults can act
	// on (etcd-1-peer, redis-1-repl). Nil for none.
	Links func(specs []backends.ServerSpec) []string
	// LeaderIsMaster says the leading server is a master that a failover
	// replaces (the "master" role), not an elected leader.
	LeaderIsMaster bool
	// BindsSource says the kind's servers use their own address as the
	// source of their connections to peers, so that address-level
	// partitions separate them on loopback.
	BindsSource bool

	// What the rest of lockbench reads of the kind, each list derived
	// from these declarations (TestEveryServerKindIsComplete names what
	// a kind leaves undeclared):

	// Faults is what faults may do to the kind's servers beyond stopping,
	// killing and cutting them: how their clock moves (required), the
	// protocol a fault speaks to them, a memory to fill, a standby to
	// promote. Faults receive it as data (faults.Env.Server) and act on
	// what it says, never on the kind's name; faults.Abilities.Check
	// holds it to what the faults implement.
	Faults faults.Abilities
	// Credentials is the family of credentials a targets file gives the
	// kind's servers (the key of its auth section, by which a backend
	// reads them: env.Credentials): the replicated Redis servers are
	// Redis's. Required.
	Credentials string
	// Drivers says a driver process may be given the kind's servers (its
	// hello lists them): a backend a driver names as its server
	// (backends.Info.Drivers) starts only such kinds.
	Drivers bool
	// Setup is what `make setup` installs for the kind (required): the
	// Makefile's presence checks and builds are generated from it
	// (kinds.mk, TestKindsMakefile).
	Setup Setup
	// Compose is the profile of compose/docker-compose.yml whose
	// services are the kind's servers, and Kube the group (StatefulSet)
	// of internal/machinery/kube's topology; NotDeployed says why a kind has
	// neither (it runs only where lockbench starts it, or in a topology
	// file of its own). One of the two is required.
	Compose, Kube, NotDeployed string
}

// Setup is what `make setup` installs for a server kind.
type Setup struct {
	// Apt are the Debian packages it needs.
	Apt []Package
	// Build names the server scripts/build-servers.sh builds from the Go
	// module proxy ("etcd").
	Build string
}

// Package is a Debian package and how the Makefile sees it installed.
type Package struct {
	Name string
	// Present is a shell test that succeeds once the package is
	// installed: `command -v redis-server`, `[ -f /usr/share/java/x.jar ]`.
	Present string
}

// ServerKind is the kind as faults see it (faults.Env.Server): its name
// and the abilities it declares.
func (k Kind) ServerKind() faults.ServerKind {
	return faults.ServerKind{Name: k.Name, Abilities: k.Faults}
}

// FaultKind returns what faults see of the kind registered under name;
// an unknown kind can do nothing (its clock untouchable).
func FaultKind(name string) faults.ServerKind {
	if k, err := LookupKind(name); err == nil {
		return k.ServerKind()
	}
	return faults.ServerKind{Name: name, Abilities: faults.Abilities{Clock: faults.ClockNone}}
}

// FaultKinds lists what faults see of every registered kind.
func FaultKinds() []faults.ServerKind {
	var out []faults.ServerKind
	for _, k := range Kinds() {
		out = append(out, k.ServerKind())
	}
	return out
}

// CredentialFamilies lists the credential families of the registered
// kinds (Kind.Credentials), sorted, once each: what a targets file's auth
// section may name.
func CredentialFamilies() []string {
	var out []string
	for _, k := range Kinds() {
		if k.Credentials != "" && !slices.Contains(out, k.Credentials) {
			out = append(out, k.Credentials)
		}
	}
	slices.Sort(out)
	return out
}

var kinds = config.NewRegistry[Kind]("server kind")

// RegisterKind adds a server kind; it panics on a duplicate name.
func RegisterKind(k Kind) { kinds.Register(k.Name, k) }

// LookupKind returns the server kind registered under name.
func LookupKind(name string) (Kind, error) { return kinds.Lookup(name) }

// Kinds returns every registered server kind, sorted by name.
func Kinds() []Kind { return kinds.All() }

// HasLeader reports whether servers of kind have a leader (or master) that
// Leader can find.
func HasLeader(kind string) bool {
	k, err := LookupKind(kind)
	return err == nil && k.Leader != nil
}

// BindsSource reports whether servers of kind use their own address as
// the source of connections to their peers (Kind.BindsSource).
func BindsSource(kind string) bool {
	k, err := LookupKind(kind)
	return err == nil && k.BindsSource
}

// ShortVersion trims a kind's version banner (Kind.Short); an unknown
// kind's banner is kept.
func ShortVersion(kind, banner string) string {
	if k, err := LookupKind(kind); err == nil && k.Short != nil {
		return k.Short(banner)
	}
	return banner
}

// ServerLinks lists the server-side links (Kind.Links) of a cluster of
// specs, in the specs' order of kinds.
func ServerLinks(specs []backends.ServerSpec) []string {
	var order []string
	groups := map[string][]backends.ServerSpec{}
	for _, sp := range specs {
		if _, seen := groups[sp.Kind]; !seen {
			order = append(order, sp.Kind)
		}
		groups[sp.Kind] = append(groups[sp.Kind], sp)
	}
	var out []string
	for _, name := range order {
		if k, err := LookupKind(name); err == nil && k.Links != nil {
			out = append(out, k.Links(groups[name])...)
		}
	}
	return out
}

// IsMaster reports whether servers of kind lead as a master (Kind.LeaderIsMaster).
func IsMaster(kind string) bool {
	k, err := LookupKind(kind)
	return err == nil && k.LeaderIsMaster
}

// binary finds the executable of a registered kind.
func binary(kind string) (string, error) {
	k, err := LookupKind(kind)
	if err != nil {
		return "", err
	}
	return k.Binary()
}
