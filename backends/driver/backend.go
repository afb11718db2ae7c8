// Package driver is the driver backend: a lock client in any language,
// run as a process that speaks the driver protocol (docs/drivers.md) —
// JSON lines on its stdin and stdout — so that lockbench can judge the
// client library people really use (redis-py, kazoo, Curator, ...) under
// the same faults and model as its Go clients.
//
// A driver backend is just another backend. On the coordinator's side it
// names the server kind it talks to (a Go backend's name: the cluster is
// the one that backend starts) and declares, before any driver runs, what
// the run must know in advance: fencing tokens, extension, the lease. In a
// worker, Open starts one driver process per instance (per client for a
// driver that serves one client at a time) inside the instance's process
// group, so pause, kill and CPU faults act on it as on a Go client; every
// server connection goes through a relay that dials through the instance's
// routed dialer, so link faults act on it too. The critical section, the
// protected resource and the fencing check stay lockbench's.
//
// A driver that crashes, hangs or writes what the protocol does not allow
// breaks (backends.Breakable): the worker ends its instance with an error
// naming the driver and the line, and the case is invalid.
package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/drivers"
	"github.com/lockbench/lockbench/internal/config"
	"go.yaml.in/yaml/v3"
)

func init() {
	backends.Register(backends.Info{
		Name:       "driver",
		Summary:    "a lock client in any language, as a driver process (docs/drivers.md); driver:LIBRARY@VERSION runs a reference driver",
		Options:    Options{},
		New:        func(decode backends.Decoder) (backends.Backend, error) { return New("", decode) },
		NewLabeled: New,
		Doc: backends.Doc{
			Servers: "the cluster of the Go backend its `server` option names (one that lets drivers name it)",
			Models:  "a lock client in any language, as a driver process speaking JSON lines (docs/drivers.md); `driver:LIBRARY@VERSION` runs a reference driver (redis-py, kazoo, python-etcd3, Curator, node-redis)",
			Token:   "the driver's, when its hello says it has one",
			Lost:    "the driver's `lost` message, when its hello says it sends one",
			Options: "`command`, `server`, `server_options`, `library`, `env`, `acquire`, `lease`, `tokens`, `extend`, `renews`, `one_member`, `dials`, `start_timeout` (30s), `answer_grace` (2s): docs/drivers.md"},
		Paused: backends.Paused{Excused: "a driver is its own process, its library's lost signal checked by `bench driver check` (lostSignal in checkfaults.go), and its holder paused past the lease, driver included, by scenarios/drivers.yaml (make bench-drivers)"},
	})
}

// Options are a driver case's options.
type Options struct {
	Command []string `yaml:"command" doc:"the driver's command and arguments (default: the reference driver the label names)"`
	Server  string   `yaml:"server" doc:"the server it talks to, as the Go backend of that name starts it: a backend that lets drivers name it (docs/backends.md marks them: redis, etcd, ...; default: the reference driver's)"`
	// ServerOptions go to the Go backend of Server, for its cluster's shape.
	ServerOptions map[string]any `yaml:"server_options" doc:"options of the server's Go backend, for its cluster (default: that backend's defaults)"`
	// Library are the library's own options, passed to the driver.
	Library map[string]any    `yaml:"library" doc:"the client library's own options, passed in the hello (default: none, the library's defaults)"`
	Env     map[string]string `yaml:"env" doc:"environment variables added for the driver (default: none)"`
	Acquire string            `yaml:"acquire" doc:"wait (the library's blocking acquire, up to the acquire timeout) or try (default: the library's own, the first its driver lists)"`
	// What the run must know before the driver starts; the driver's
	// hello must agree.
	Lease     string `yaml:"lease" doc:"what bounds a grant on the server: ttl (the workload's), a duration (a session timeout) or none (default: the reference driver's; ttl)"`
	Tokens    *bool  `yaml:"tokens" doc:"leases carry fencing tokens (default: the reference driver's; false)"`
	Extend    *bool  `yaml:"extend" doc:"leases can be extended (default: the reference driver's; false)"`
	Renews    *bool  `yaml:"renews" doc:"the library renews its leases in the background, unseen (default: the reference driver's; false)"`
	OneMember *bool  `yaml:"one_member" doc:"an instance talks to one member at a time (default: the reference driver's; false)"`
	// Dials lists the servers the driver connects to.
	Dials        []string        `yaml:"dials" doc:"the servers the driver connects to (default: the reference driver's; all)"`
	StartTimeout config.Duration `yaml:"start_timeout" doc:"how long the driver may take to answer its hello (default 30s)"`
	AnswerGrace  config.Duration `yaml:"answer_grace" doc:"how long past an operation's timeout the driver may take to answer before it counts as hung (default 2s)"`
}

// Backend is a configured driver backend.
type Backend struct {
	name     string // the backend name, for messages: driver[:label]
	library  string // the label's library ("" if none)
	version  string // the label's version ("" if none)
	ref      *Reference
	opt      Options
	server   backends.Backend
	kind     string // the server's kind: the Go backend's name
	lease    leaseRule
	tokens   bool
	extend   bool
	renews   bool
	one      bool
	dials    []string
	acquire  string
	declared string // what the scenario declared, for mismatch messages
}

// leaseRule is how a grant's lease follows from the workload's ttl.
type leaseRule struct {
	kind string        // "ttl", "fixed", "none", "ref"
	d    time.Duration // fixed
}

// New builds a driver backend from its label (LIBRARY[@VERSION], which
// names a reference driver when the options give no command) and options.
func New(label string, decode backends.Decoder) (backends.Backend, error) {
	var o Options
	if err := decode(&o); err != nil {
		return nil, err
	}
	b := &Backend{name: "driver", opt: o}
	if label != "" {
		b.name += ":" + label
		b.library, b.version, _ = strings.Cut(label, "@")
		if b.library == "" || strings.ContainsAny(label, " \t") || strings.Count(label, "@") > 1 {
			return nil, fmt.Errorf("label %q: want LIBRARY or LIBRARY@VERSION", label)
		}
	}
	if len(o.Command) == 0 {
		ref, err := LookupReference(b.library)
		if err != nil {
			return nil, fmt.Errorf("no command: %w", err)
		}
		b.ref = ref
	}
	server := o.Server
	if b.ref != nil {
		if server != "" && server != b.ref.Server {
			return nil, fmt.Errorf("server: the reference driver %s talks to %s, not %s", b.ref.Name, b.ref.Server, server)
		}
		server = b.ref.Server
	}
	if server == "" {
		return nil, fmt.Errorf("server: required (one of %s)", strings.Join(backends.DriverServers(), ", "))
	}
	if !slices.Contains(backends.DriverServers(), server) {
		return nil, fmt.Errorf("server: %q is not one of %s", server, strings.Join(backends.DriverServers(), ", "))
	}
	srvOpts := []byte("{}")
	if len(o.ServerOptions) > 0 {
		var err error
		if srvOpts, err = yaml.Marshal(o.ServerOptions); err != nil {
			return nil, fmt.Errorf("server_options: %w", err)
		}
	}
	sb, err := backends.New(server, func(v any) error { return config.DecodeStrictBytes(srvOpts, v, 0) })
	if err != nil {
		return nil, fmt.Errorf("server_options: %w", err)
	}
	b.server, b.kind = sb, server
	if b.lease, err = parseLease(o.Lease, b.ref != nil); err != nil {
		return nil, err
	}
	flag := func(v *bool, def bool) bool {
		if v != nil {
			return *v
		}
		return def
	}
	var r Reference
	if b.ref != nil {
		r = *b.ref
	}
	b.tokens = flag(o.Tokens, r.Tokens(o.Library))
	b.extend = flag(o.Extend, r.Extend)
	b.renews = flag(o.Renews, r.Renews(o.Library))
	b.one = flag(o.OneMember, r.OneMember)
	b.dials = o.Dials
	if b.dials == nil {
		b.dials = r.Dials
	}
	servers := map[string]bool{}
	for _, s := range sb.Servers() {
		servers[s.Name] = true
	}
	for _, d := range b.dials {
		if !servers[d] {
			return nil, fmt.Errorf("dials: %s is not a server of %s", d, server)
		}
	}
	switch o.Acquire {
	case "", AcquireWait, AcquireTry:
	default:
		return nil, fmt.Errorf("acquire: %q is neither wait nor try", o.Acquire)
	}
	b.acquire = o.Acquire
	if b.acquire == "" {
		b.acquire = r.Acquire
	}
	if o.StartTimeout < 0 || o.AnswerGrace < 0 {
		return nil, errors.New("start_timeout and answer_grace must not be negative")
	}
	if b.ref != nil {
		if err := b.ref.Check(o.Library); err != nil {
			return nil, fmt.Errorf("library: %w", err)
		}
	}
	b.declared = fmt.Sprintf("tokens: %v, extend: %v", b.tokens, b.extend)
	return b, nil
}

func parseLease(s string, hasRef bool) (leaseRule, error) {
	switch s {
	case "":
		if hasRef {
			return leaseRule{kind: "ref"}, nil
		}
		return leaseRule{kind: "ttl"}, nil
	case "ttl", "none":
		return leaseRule{kind: s}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return leaseRule{}, fmt.Errorf("lease: %q is not ttl, none or a positive duration", s)
	}
	return leaseRule{kind: "fixed", d: d}, nil
}

// Name is the backend's name: driver, or driver:LABEL.
func (b *Backend) Name() string { return b.name }

// Reference returns the reference driver the backend runs, or nil.
func (b *Backend) Reference() *Reference { return b.ref }

// Servers are those of the server's Go backend.
func (b *Backend) Servers() []backends.ServerSpec { return b.server.Servers() }

// Fenced: the driver's leases carry tokens (declared).
func (b *Backend) Fenced() bool { return b.tokens }

// CanExtend: the driver can extend a lease (declared).
func (b *Backend) CanExtend() bool { return b.extend }

// RenewsInBackground: the library renews unseen (declared).
func (b *Backend) RenewsInBackground() bool { return b.renews }

// OneMember: an instance talks to one member at a time (declared).
func (b *Backend) OneMember() bool { return b.one }

// Dials lists the servers the driver connects to.
func (b *Backend) Dials(instance, instances int) []string {
	if b.dials != nil {
		return b.dials
	}
	return backends.Dials(b.server, instance, instances)
}

// LeaseTime is what bounds a grant on the server.
func (b *Backend) LeaseTime(ttl time.Duration) time.Duration {
	switch b.lease.kind {
	case "ttl":
		return ttl
	case "fixed":
		return b.lease.d
	case "ref":
		return b.ref.Lease(b.opt.Library, b.server.Servers(), ttl)
	}
	return 0
}

// Cycle is the period of what a fault's effect depends on (backends.Cycler),
// by the rule of the server kind's own backend, on the driver's lease:
// a third of a ZooKeeper session (its client pings a third of the
// timeout), half a Consul session's TTL, an etcd lease, else the lease.
func (b *Backend) Cycle(ttl time.Duration) time.Duration {
	lease := b.LeaseTime(ttl)
	switch b.kind {
	case "zookeeper":
		return lease / 3
	case "consul":
		return lease / 2
	}
	return lease
}

// ExpiryBound is the longest the service may keep a silent holder's grant
// (backends.ExpiryBounder), by the server kind's rule: an etcd lease is
// given its whole TTL again by each new leader, so twice it; else the
// lease.
func (b *Backend) ExpiryBound(ttl time.Duration) time.Duration {
	if b.kind == "etcd" {
		return 2 * b.LeaseTime(ttl)
	}
	return b.LeaseTime(ttl)
}

// Command is the driver's command line (a reference driver's needs its
// files in place: drivers.Dir).
func (b *Backend) Command() ([]string, []string, error) {
	var env []string
	for k, v := range b.opt.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	if b.ref == nil {
		// A driver of one's own finds the protocol helpers (the Python,
		// Node and Java ones, docs/drivers.md) in the folder this names,
		// outside the clone: nothing it imports writes into lockbench's.
		dir, err := drivers.Dir()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", b.name, err)
		}
		return b.opt.Command, append([]string{EnvDrivers + "=" + dir}, env...), nil
	}
	cmd, renv, err := b.ref.command()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", b.name, err)
	}
	return cmd, append(renv, env...), nil
}

// Config is how this backend starts its driver for a worker instance:
// servers is what the hello names (their relays' addresses).
func (b *Backend) Config(env backends.Env, servers []Server, log io.Writer) (Config, error) {
	cmd, extra, err := b.Command()
	if err != nil {
		return Config{}, err
	}
	opts := map[string]any{}
	for k, v := range b.opt.Library {
		opts[k] = v
	}
	return Config{
		Name: b.name, Command: cmd, Env: extra, Log: log,
		StartTimeout: b.opt.StartTimeout.D(), Grace: b.opt.AnswerGrace.D(),
		Hello: Hello{Instance: env.Instance, Servers: servers, Namespace: "lockbench", TTLMs: env.TTL.Milliseconds(), Options: opts},
	}, nil
}

// HelloServers lists the servers for a hello: every server of the cluster,
// reached at its relay.
func (b *Backend) HelloServers(rs *Relays) []Server {
	var out []Server
	for _, s := range b.Servers() {
		r := rs.Get(s.Name)
		if r == nil {
			continue
		}
		out = append(out, Server{Name: s.Name, Kind: s.Kind, Addr: r.Addr(), Real: r.Real, Settings: s.Settings})
	}
	return out
}

// Agree checks that what a driver said in its hello is what the case
// declared and its label names.
func (b *Backend) Agree(h Reply) error {
	ab := h.Abilities
	switch {
	case b.library != "" && h.Library != b.library:
		return withFix(fmt.Errorf("the case names library %s, but the driver says it is %s %s", b.library, h.Library, h.Version),
			fmt.Sprintf("name the library the driver is: driver:%s@%s", h.Library, h.Version))
	case b.version != "" && h.Version != b.version:
		return withFix(fmt.Errorf("the case names %s@%s, but the driver says it is %s %s: rename the case's backend, or install %s", b.library, b.version, h.Library, h.Version, b.version),
			fmt.Sprintf("driver:%s@%s (or driver:%s, any version)", h.Library, h.Version, h.Library))
	case b.tokens && !ab.Token:
		return withFix(fmt.Errorf("the case declares fencing tokens (%s), but the driver says it has none", b.declared), "tokens: false")
	case !b.tokens && ab.Token:
		return withFix(fmt.Errorf("the driver says its leases carry fencing tokens, but the case declares none (%s): set tokens: true", b.declared), "tokens: true")
	case b.extend && !ab.Extend:
		return withFix(fmt.Errorf("the case declares extension (%s), but the driver says it cannot extend", b.declared), "extend: false (and no auto_extend in the workload)")
	case b.acquire != "" && !slices.Contains(ab.Acquire, b.acquire):
		return withFix(fmt.Errorf("acquire: %s, but the driver offers only %s", b.acquire, strings.Join(ab.Acquire, ", ")), "acquire: "+ab.Acquire[0])
	}
	return nil
}

// wait says whether acquisitions wait, given the driver's abilities.
func (b *Backend) wait(ab Abilities) bool {
	mode := b.acquire
	if mode == "" {
		mode = ab.Acquire[0]
	}
	return mode == AcquireWait
}

// Open starts (or shares) the instance's driver and returns the client's
// Locker on it.
func (b *Backend) Open(ctx context.Context, env backends.Env) (backends.Locker, error) {
	for _, fam := range slices.Sorted(maps.Keys(env.Auth)) {
		if env.Auth[fam] != nil {
			return nil, fmt.Errorf("%s: drivers are not given credentials yet (the targets file has %s credentials)", b.name, fam)
		}
	}
	v, err := env.Shared.Get("driver-relays", func() (any, func() error, error) {
		rs, err := StartRelays(env.Endpoints, env.Dialer())
		if err != nil {
			return nil, nil, err
		}
		return rs, rs.Close, nil
	})
	if err != nil {
		return nil, err
	}
	rs := v.(*Relays)
	start := func() (*Process, error) {
		cfg, err := b.Config(env, b.HelloServers(rs), os.Stderr)
		if err != nil {
			return nil, err
		}
		p, err := Start(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if err := b.Agree(p.Hello()); err != nil {
			p.Close()
			return nil, fmt.Errorf("driver %s: %w", b.name, err)
		}
		return p, nil
	}
	v, err = env.Shared.Get("driver-process", func() (any, func() error, error) {
		p, err := start()
		if err != nil {
			return nil, nil, err
		}
		return p, p.Close, nil
	})
	if err != nil {
		return nil, err
	}
	p := v.(*Process)
	own := false
	if !p.Abilities().Concurrent && env.Client > 0 {
		if p, err = start(); err != nil {
			return nil, err
		}
		own = true
	}
	return newLocker(p, env.Client, b.wait(p.Abilities()), env.TTL, own), nil
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(d.Seconds())) * time.Second
}

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Leaser        = (*Backend)(nil)
	_ backends.Renewer       = (*Backend)(nil)
	_ backends.Router        = (*Backend)(nil)
	_ backends.Extendable    = (*Backend)(nil)
	_ backends.Cycler        = (*Backend)(nil)
	_ backends.ExpiryBounder = (*Backend)(nil)
)
