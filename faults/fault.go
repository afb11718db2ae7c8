// Package faults holds the failures lockbench injects, one small type per
// fault, each registered by name with a constructor that decodes its own
// options strictly.
//
// A fault is started on a concrete target and returns an Effect: what was
// seen when it was applied, a check of what held while it was in force, and
// how to heal it. A fault counts as applied only when its effect was seen
// (the process stopped, the link stopped answering, the rule dropped
// packets, a new master took over): asking is not enough. The runner
// records the window between a successful Start and the end of Heal as the
// time the fault was really in effect (faults.jsonl, and fault marks in the
// history), with what was observed. A fault that cannot be applied, or
// whose effect was not seen, is reported, never skipped: the run is then
// invalid, with the reason.
//
// Targets are named in scenario files by the grammar in Target's doc
// comment (servers, instances, links, and roles such as holder or leader,
// resolved at the moment of injection because the interesting faults hit
// whoever holds the lock or leads the cluster right then). A link that no
// fault acts on is direct: a client connects to the server from its
// instance's own address, with no proxy in between.
package faults

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/links"
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
	RoleFollower = "follower"
	RoleMaster   = "master"
	// RoleConnectedMember, scoped to an instance or an instance role
	// (connected-member@instance-2, connected-member@holder), is the server
	// that instance's clients are connected to when the fault is injected,
	// as the kernel lists its connections; in a cut's from or to list,
	// unscoped, it is the target instance's own.
	RoleConnectedMember = "connected-member"
)

// Env is what a fault can act on: the running case. Every target it is
// given is concrete (the runner resolved its role): a server, an instance
// or a link.
type Env interface {
	// Link returns the toxiproxy proxy of a link (link:redis-1,
	// link:resource@instance-2).
	Link(t Target) (*toxiclient.Proxy, error)
	// Signal sends sig to an instance's or a server's process group. When
	// the process has exited (a kill fault ended it), the error wraps
	// ErrGone.
	Signal(t Target, sig syscall.Signal) error
	// Kill SIGKILLs an instance or a server.
	Kill(t Target) error
	// Restart starts a killed server again, with its data directory and
	// persistence mode, and waits until it answers.
	Restart(ctx context.Context, server Target) error
	// Server returns a server's real address (not its proxy) and its
	// kind: what its registration declares a fault may do to it.
	Server(t Target) (addr string, kind ServerKind, err error)
	// Peers lists, for a server, the other members of its cluster; for
	// an instance, the servers its clients dial.
	Peers(t Target) []Target
	// Cut drops the packets from one server or instance to another (one
	// direction), below TCP: TCP and UDP alike.
	Cut(from, to Target) (Cut, error)

	// Stopped reports whether every process of an instance's or a server's
	// process group is stopped (SIGSTOP took effect).
	Stopped(t Target) (bool, error)
	// Traffic returns what crossed a link so far, summed over the
	// instances it carries, from reports the instances made after the
	// call began.
	Traffic(ctx context.Context, link Target) (links.Counts, error)
	// Leader returns the name of the current leader or master, or an
	// error when none can be found.
	Leader(ctx context.Context) (string, error)
}

// ProtoCutter is implemented by Envs that can cut one protocol only ("tcp"
// or "udp") between two servers or instances.
type ProtoCutter interface {
	CutProto(from, to Target, proto string) (Cut, error)
}

// Lossy is implemented by Envs that can drop a share of the packets from
// one server or instance to another (iptables' statistic match).
type Lossy interface {
	Lose(from, to Target, p float64) (Cut, error)
}

// Shaper is implemented by Envs whose servers and instances are hosts of
// their own (network: hosts): Shape applies netem to what target sends to
// the given servers or instances (to everyone when to is empty).
type Shaper interface {
	Shape(t Target, to []Target, n Netem) (Cut, error)
}

// Netem is a tc netem setting: delay with jitter, and a loss percentage.
type Netem struct {
	Delay, Jitter time.Duration
	Loss          float64 // percent
}

// Cut is an address-level rule in force.
type Cut interface {
	// Packets is how many packets the rule has dropped so far.
	Packets() (int64, error)
	// Undo removes the rule.
	Undo() error
}

// Injected is implemented by Cuts that an outside injector makes and
// keeps (Chaos Mesh, in the Kubernetes mode): lockbench cannot count what
// they drop or delay, and sees them by the injector's record that they
// are in force on every pod they select (checker/MODEL.md §10). InForce
// says so, or errors when the record says otherwise (not injected into
// every target, or recovered before the window ended).
type Injected interface {
	InForce(ctx context.Context) (string, error)
}

// observeRules is the observation of rules in force at the end of a
// window: for rules the injector keeps, its record (every one must be in
// force); for lockbench's own, what packets does (the sum over the rules).
func observeRules(ctx context.Context, cuts []Cut, packets func(total int64) (string, error)) (string, error) {
	var seen []string
	var total int64
	for _, c := range cuts {
		if inj, ok := c.(Injected); ok {
			s, err := inj.InForce(ctx)
			if err != nil {
				return "", err
			}
			seen = append(seen, s)
			continue
		}
		n, err := c.Packets()
		if err != nil {
			return "", err
		}
		total += n
	}
	if len(seen) == len(cuts) {
		return strings.Join(seen, "; ") + " (the injector's record: packets are not counted there)", nil
	}
	return packets(total)
}

// RoleLeftError is what Start returns when its target, resolved from a
// role, no longer played it once the fault took effect (a holder that
// left its critical section between its resolution and its pause): the
// fault has undone itself, and the runner resolves the role again.
type RoleLeftError struct{ Msg string }

func (e *RoleLeftError) Error() string { return e.Msg }

// RoleKeeper is implemented by Envs that can say whether a target
// resolved from a role (Target.From) still plays it now: whether the
// holder is still inside its critical section.
type RoleKeeper interface {
	Plays(t Target) bool
}

// IdleError is what an Effect's Check returns when nothing used the
// fault's target while it was in force (no client sent anything through a
// link, no packet tried to cross a cut): alone, the fault did nothing the
// run can show; as one member of a group whose other member was observed,
// it is part of an observed effect (checker/MODEL.md §10).
type IdleError struct{ Msg string }

func (e *IdleError) Error() string { return e.Msg }

// IsIdle reports whether err says the fault's target was idle.
func IsIdle(err error) bool {
	var ie *IdleError
	return errors.As(err, &ie)
}

// Effect is a fault in force.
type Effect struct {
	// Seen says what was observed when the fault was applied. Start
	// returns an Effect only once the fault's immediate effect was seen.
	Seen string
	// Check, if set, runs at the end of the window, before Heal. It says
	// what was observed while the fault was in force, or returns an error
	// saying what was not (the case is then invalid).
	Check func(ctx context.Context) (string, error)
	// Heal undoes the fault and says what it observed doing so.
	Heal func(ctx context.Context) (string, error)
	// Emulated says how the fault was emulated rather than made, if it was.
	Emulated string
	// EndedBy names, once Heal returned, the fault of the case whose kill
	// ended this one's effect before the heal could undo it (a pause whose
	// stopped process a kill ended): the fault-end mark carries it
	// (history.Event.By, checker/MODEL.md §10). "" when the heal undid it.
	EndedBy string
}

// KillRecord is an Env that knows which fault of the case killed a
// target's process: what a heal that finds the process gone asks before
// it calls the heal done (checker/MODEL.md §10, A8).
type KillRecord interface {
	// KilledBy names the fault of the case that killed t's process at or
	// after since, "" when none did.
	KilledBy(t Target, since time.Time) string
}

// Fault is one configured failure.
type Fault interface {
	// Start applies the fault to target (concrete, never a role),
	// observes that it took effect, and returns the Effect.
	Start(ctx context.Context, env Env, target Target) (*Effect, error)
}

// Decoder decodes a fault's options into v, rejecting unknown fields.
type Decoder func(v any) error

// Info describes a registered fault type.
type Info struct {
	Name    string
	Summary string
	// Does says what the fault does, and Observed what shows it applied:
	// docs/scenarios.md's table of faults is made of them (with Targets,
	// the kinds it acts on and its requirements).
	Does, Observed string
	// Example is a use of the fault that validation accepts on a machine
	// with everything it requires: the tests try it (internal/scenario's).
	Example Example
	Targets []Kind // the kinds of target it applies to
	// Instant faults happen at one moment (a kill, a clock jump): their
	// window may be zero.
	Instant bool
	// Emulated says how the fault is emulated rather than real; reports
	// repeat it.
	Emulated string
	// NeedsFirewall marks faults made with iptables: they need root, and
	// servers that use their own address as source (instances always do).
	NeedsFirewall bool
	// NeedsHosts marks faults that exist only when every server and
	// instance is a host of its own (network: hosts).
	NeedsHosts bool
	// NeedsNetem marks faults made with tc netem, which some kernels lack.
	NeedsNetem bool
	// NeedsFuse marks faults that put the servers' data dirs on a FUSE
	// layer of the harness's (power-loss): /dev/fuse and root, servers
	// lockbench starts itself.
	NeedsFuse bool
	// Effect is what the fault does to the processes it targets (stops,
	// ends them, loses their unsynced writes): the records carry it to the
	// checker (history.FaultCore.Effect).
	Effect history.FaultEffect
	// Action is what the fault does to its target (see Action): what a
	// deployment mode must offer for the fault to run there. A fault that
	// acts on links only defaults to ActProxy.
	Action Action
	// Asks is what the fault asks of a server's kind ("": nothing, it
	// acts on every kind): it acts on the kinds whose registration
	// declares the ability (Abilities.Can), and on those whose clock moves
	// for real (AskClock, ClockFaketime) only under libfaketime.
	Asks Ability
	// NeedsCgroup names the cgroup v1 controller a fault confines its
	// target with ("cpu", "blkio"), or "".
	NeedsCgroup string
	// Options is the zero value of the fault's options struct (nil:
	// none): its yaml and doc tags are what `bench list` shows.
	Options any
	// Classes says which fault class (history.ClassOrder) the fault
	// belongs to on each kind of target it accepts; LeaderClass, when set,
	// replaces the Server class when the target is the leader or master
	// role. The decision view files a case under its faults' classes.
	Classes     map[Kind]string
	LeaderClass string
	// Claims names what of its target the fault takes over while in
	// force (ClaimProcess: the process's state, or an answering process;
	// "cgroup:cpu"; a toxic's own type on a link). Two faults may overlap
	// on one target unless their claims meet (a kill inside a disk stall,
	// latency and a bandwidth limit on one link, a pause during CPU
	// starvation); nil claims the fault's own name, so two of one type
	// never overlap there.
	Claims []string
	// Lasting marks faults that change a server for good (a restart, a
	// promotion, a moved clock): after a case where one acted on a server,
	// the next case starts a fresh cluster instead of reusing it. Faults on
	// instances and links, and the others on servers, are undone at heal.
	Lasting bool
	New     func(decode Decoder) (Fault, error)
}

// Example is a use of a fault in a case of a scenario.
type Example struct {
	// Backend is the case's backend, Options its options (YAML, "" for
	// none) and Network the scenario's network ("" for the default).
	Backend, Options, Network string
	// Fault is the fault as a scenario writes it, without at and for:
	// {type: clock-jump, jump: 5s, target: postgres-1}.
	Fault string
}

// Class returns the fault's class on target (a role or a name; for a
// set, which is of one kind, any of its members).
func (i Info) Class(t Target) string {
	if t.Kind == Server && (t.Name == RoleLeader || t.Name == RoleMaster) && i.LeaderClass != "" {
		return i.LeaderClass
	}
	if c, ok := i.Classes[t.Kind]; ok {
		return c
	}
	return history.ClassMixed
}

// ClassOf is Class of a target as written (a role, a name, or a set of
// one kind separated by commas), for a caller that holds its text.
func (i Info) ClassOf(written string) string {
	first, _, _ := strings.Cut(written, ",")
	return i.Class(ParseTarget(first))
}

// ClaimProcess is the claim of faults that stop, kill or restart their
// target's process, or need it answering to be applied.
const ClaimProcess = "process"

// Conflicts returns what i and j both claim of a target they share
// ("" when they can overlap there).
func (i Info) Conflicts(j Info) string {
	for _, a := range i.claims() {
		for _, b := range j.claims() {
			if a == b {
				return a
			}
		}
	}
	return ""
}

// ClaimList is what the fault takes over of its target (Claims, or its
// own name), as bench list shows it.
func (i Info) ClaimList() []string { return i.claims() }

func (i Info) claims() []string {
	if len(i.Claims) == 0 {
		return []string{i.Name}
	}
	return i.Claims
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

// ErrGone says a target's process has exited: there is nothing left to
// signal (a server killed while it was paused, before its restart, or a
// process the harness lost: KillRecord tells the two apart).
var ErrGone = errors.New("nothing left to signal")

var registry = config.NewRegistry[Info]("fault type")

// Register adds a fault type; it panics on a duplicate or incomplete entry.
func Register(info Info) {
	if info.New == nil || len(info.Targets) == 0 {
		panic("faults: Register with a nil constructor or no targets")
	}
	if info.Action == "" && len(info.Targets) == 1 && info.Targets[0] == Link {
		info.Action = ActProxy
	}
	if info.Action == "" {
		panic("faults: Register " + info.Name + " with no Action")
	}
	registry.Register(info.Name, info)
}

// Lookup returns the fault type registered under name.
func Lookup(name string) (Info, error) { return registry.Lookup(name) }

// All lists the registered fault types sorted by name.
func All() []Info { return registry.All() }

// OptionList lists the fault's options from the yaml and doc tags of its
// options struct, as `bench list` shows them.
func (i Info) OptionList() []config.Option { return config.OptionsOf(i.Options) }

// Requirement is something a fault needs of the machine it runs on.
type Requirement string

// The requirements (cluster.Available probes each).
const (
	NeedFirewall Requirement = "firewall" // iptables rules in a chain of the harness's own (root)
	NeedHosts    Requirement = "hosts"    // a network namespace per server and instance (root)
	NeedNetem    Requirement = "netem"    // tc netem in the kernel (root)
	NeedCgroup   Requirement = "cgroup"   // a cgroup v1 controller (root); which one: Info.NeedsCgroup
	NeedFaketime Requirement = "faketime" // libfaketime, for the servers whose clock it moves
	NeedFuse     Requirement = "fuse"     // /dev/fuse and root: data dirs on a FUSE layer
)

// Requires lists what the fault needs of the machine, from its flags: the
// one place bench list, validation and the runner read them from.
func (i Info) Requires() []Requirement {
	var out []Requirement
	if i.NeedsFirewall {
		out = append(out, NeedFirewall)
	}
	if i.NeedsHosts {
		out = append(out, NeedHosts)
	}
	if i.NeedsNetem {
		out = append(out, NeedNetem)
	}
	if i.NeedsCgroup != "" {
		out = append(out, NeedCgroup)
	}
	if i.Asks == AskClock {
		out = append(out, NeedFaketime)
	}
	if i.NeedsFuse {
		out = append(out, NeedFuse)
	}
	return out
}

// NeedsRoot reports whether the fault needs root: iptables, namespaces,
// netem and cgroups do; libfaketime does not.
func (i Info) NeedsRoot() bool {
	for _, r := range i.Requires() {
		if r != NeedFaketime {
			return true
		}
	}
	return false
}

// OneProtocol is implemented by faults that may cut one protocol only
// (isolate's protocol option); validation asks whether the deployment can.
type OneProtocol interface {
	Protocol() string
}

// Named is implemented by faults whose options name more servers (the
// other side of a split); the scenario checks that they exist.
type Named interface {
	Names() []string
}

// noHeal is the Heal of a fault with nothing to undo.
func noHeal(context.Context) (string, error) { return "", nil }
