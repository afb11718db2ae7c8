package cluster

import (
	"slices"
	"strings"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/config"
)

// On is a class of fault target as a deployment mode sees it: a link
// splits in two, since a client link (an instance to a server) always
// leaves from the harness's side, and a server-side link (etcd-1-peer,
// redis-1-repl) only exists as a proxy where lockbench starts the servers.
type On string

// The target classes.
const (
	OnServer     On = "servers"
	OnInstance   On = "instances"
	OnClientLink On = "client links"
	OnServerLink On = "server links"
)

// Ons lists the classes in the order tables show them.
var Ons = []On{OnServer, OnInstance, OnClientLink, OnServerLink}

// Mode is a deployment mode as validation, bench list and the README's
// table see it, before any cluster is made, and the placement NewWith
// makes of it: which fault actions
// (faults.Action) it can perform on which class of target, and where.
// Each placement file declares its own (loopback.go, onhosts.go,
// compose.go, external.go, onssh.go); a fault runs in a mode exactly when
// the mode offers the fault's Action on the class of its target, and a
// server of a targets file that has no control section is in the targets
// mode whatever the others have.
//
// This is the one statement of what each mode can do: scenario validation
// refuses the rest (exit 104, saying why), the runner never asks a
// placement for what its mode does not offer, and the README's fault
// table is generated from it (bench list -modes) and checked against
// validation by a test.
type Mode struct {
	Name string
	// Title heads the mode's column in the README's table.
	Title string
	// Offers lists, per action, the target classes the mode performs it on.
	Offers map[faults.Action][]On
	// Remote lists the target classes whose actions are performed
	// elsewhere than on this machine (on a server's host over SSH, by a
	// cluster's operator): this machine's requirements (root, iptables,
	// cgroups, libfaketime) are not asked for them.
	Remote []On
	// Faketime: the mode can start a server under libfaketime, so clock
	// faults act on the server kinds whose clock that moves
	// (faults.ClockFaketime); without it only on the kinds whose clock is
	// emulated.
	Faketime bool
	// NoEmulatedClock: clock faults act only where the mode moves a
	// server's clock itself (the ClockFaketime kinds), never emulated
	// through the server's data, which would need a client of lockbench's
	// own with the server's credentials.
	NoEmulatedClock bool
	// SourceCuts: a cut between two servers needs servers that send from
	// their own address (Kind.BindsSource): on loopback, etcd's and
	// ZooKeeper's peer connections come from 127.0.0.1.
	SourceCuts bool
	// WholeCuts: a cut between two servers takes every protocol (a
	// NetworkChaos has no protocol to choose): a cut of one protocol only
	// (isolate's protocol option) is made only from or to instances.
	WholeCuts bool
	// PodCuts: a cut of a server is a NetworkChaos between pods, so every
	// server of the case needs a control section for one to be made.
	PodCuts bool
	// ControlNeeds names, per action, the field a server's control section
	// must give for the mode to perform it there (disk-throttle:
	// "data_dir").
	ControlNeeds map[faults.Action]string
	// Why says why the mode refuses what it does not offer.
	Why string
	// How says, per action, how the mode performs it, or what would
	// perform it and why the mode does not (documentation: bench list
	// -modes prints it, docs/architecture.md holds it).
	How map[faults.Action]string

	// place makes the mode's placement for a cluster (NewWith).
	place func(c *Cluster, o Options) (placement, error)
}

// Does reports whether the mode performs action a on targets of class on.
func (m Mode) Does(a faults.Action, on On) bool { return slices.Contains(m.Offers[a], on) }

// Here reports whether an action on class on is performed on this
// machine, whose requirements then apply.
func (m Mode) Here(on On) bool { return !slices.Contains(m.Remote, on) }

// every is each class of target, for modes that perform an action on all.
var every = []On{OnServer, OnInstance}

var modes = config.NewRegistry[Mode]("deployment mode")

// RegisterMode adds a deployment mode; placement files call it from init.
func RegisterMode(m Mode) { modes.Register(m.Name, m) }

// LookupMode returns the mode registered under name.
func LookupMode(name string) (Mode, error) { return modes.Lookup(name) }

// The modes' names.
const (
	ModeLocal   = "local"
	ModeHosts   = "hosts"
	ModeCompose = "compose"
	ModeTargets = "targets"
	ModeSSH     = "ssh"
)

// Where says where a run's servers and instances are: what ModeOf
// chooses the mode from.
type Where struct {
	// Hosts: each server and instance on a host of its own (network:
	// hosts).
	Hosts bool
	// Targets: the servers are a targets file's; Plane is the file's
	// control plane ("" when it gives no control section, "ssh",
	// "kubernetes").
	Targets bool
	Plane   string
	// Compose: the targets file's servers are a compose topology's
	// services, which lockbench controls.
	Compose bool
}

// ModeOf is the deployment mode of a run: the one place it is chosen,
// at validation; the cluster is then made in it (Options.Mode).
func ModeOf(w Where) string {
	switch {
	case w.Compose:
		return ModeCompose
	case w.Targets && w.Plane == "kubernetes":
		return ModeKubernetes
	case w.Targets && w.Plane != "":
		return ModeSSH
	case w.Targets:
		return ModeTargets
	case w.Hosts:
		return ModeHosts
	}
	return ModeLocal
}

// ModeOrder is the order of the modes' columns: from lockbench's own
// servers to other people's.
var ModeOrder = []string{ModeLocal, ModeHosts, ModeCompose, ModeTargets, ModeSSH, ModeKubernetes}

// Modes lists the registered modes in ModeOrder.
func Modes() []Mode {
	var out []Mode
	for _, n := range ModeOrder {
		if m, err := modes.Lookup(n); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// Classes lists the target classes of a fault: a link fault's are both
// kinds of link.
func Classes(info faults.Info) []On {
	var out []On
	for _, on := range Ons {
		for _, k := range info.Targets {
			if k == kindOf(on) {
				out = append(out, on)
				break
			}
		}
	}
	return out
}

// Carries lists the classes of the fault's targets the mode acts on.
func (m Mode) Carries(info faults.Info) []On {
	var out []On
	for _, on := range Classes(info) {
		if m.Does(info.Action, on) {
			out = append(out, on)
		}
	}
	return out
}

// kindOf is the fault target kind of a class.
func kindOf(on On) faults.Kind {
	switch on {
	case OnServer:
		return faults.Server
	case OnInstance:
		return faults.Instance
	}
	return faults.Link
}

// Condition says on which servers of the class the mode performs the
// fault only, when not on all of them ("" when on all): the conditions
// validation adds to Does, as the README's table footnotes them.
func (m Mode) Condition(info faults.Info, on On) string {
	if on != OnServer || !m.Does(info.Action, on) {
		return ""
	}
	var notes []string
	if f := m.ControlNeeds[info.Action]; f != "" {
		notes = append(notes, "servers whose control section gives their "+f)
	}
	switch {
	case m.WholeCuts && info.Action == faults.ActCut:
		note := "every protocol at once: a protocol option cuts one protocol only from or to an instance"
		if m.PodCuts {
			note = "between pods, when every server of the case has a control section, and in " + note
		}
		notes = append(notes, note)
	case m.SourceCuts && info.Action == faults.ActCut:
		var kinds []string
		for _, k := range kindNames() {
			if BindsSource(k) {
				kinds = append(kinds, k)
			}
		}
		notes = append(notes, "between servers, only of kinds whose peer connections leave from their own address ("+strings.Join(kinds, ", ")+"); etcd's and ZooKeeper's members are cut in hosts mode (etcd's also by its peer links' toxics, link:etcd-N-peer)")
	case m.NoEmulatedClock && info.Asks == faults.AskClock:
		notes = append(notes, "only on "+strings.Join(ClockKinds(info, true), ", ")+" servers, whose clock this mode moves itself (the others' clock lockbench emulates through their data, which it does not write on a targets file's servers)")
	case !m.Faketime && info.Asks == faults.AskClock:
		notes = append(notes, "only on "+strings.Join(ClockKinds(info, false), ", ")+" servers (emulated): "+strings.Join(ClockKinds(info, true), ", ")+" needs libfaketime, which this mode cannot start a server under")
	}
	return strings.Join(notes, "; ")
}

func kindNames() []string { return kinds.Names() }

// ClockKinds lists the kinds a fault acts on whose clock it moves for real
// (under libfaketime: real) or emulates (!real).
func ClockKinds(info faults.Info, real bool) []string {
	var out []string
	for _, k := range Kinds() {
		if k.Faults.Can(info.Asks) && info.Faketime(k.Faults) == real {
			out = append(out, k.Name)
		}
	}
	return out
}
