package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lockbench/lockbench/history"
)

// Partitions below TCP: iptables DROP rules between addresses, so that TCP
// and UDP (Consul's gossip) are cut alike. The target is a server (cut from
// other members: the servers must use their own address as source) or a
// worker instance (cut from the servers its clients dial; the servers see
// the client vanish, which they never do behind a proxy). Heal removes
// exactly the rules the fault added; the fault counts as applied only if
// its rules dropped packets.

func init() {
	Register(Info{Name: "isolate",
		Example:  Example{Backend: "etcd", Fault: "{type: isolate, target: instance-1}"},
		Does:     "cut a member off from every other server (or from `from: [...]`, of any kind: a master from its Sentinels only), or an instance from every server it talks to, both ways, below TCP: iptables DROP rules, TCP and UDP (Consul's gossip) alike; `observe: no-traffic` for a cut meant to prevent traffic rather than interrupt it (also on `split` and `one-way`)",
		Observed: "the rules dropped packets; with `observe: no-traffic`, the rules stayed in force for the whole window, whatever they dropped",
		Action:   ActCut, Options: IsolateOptions{}, Classes: map[Kind]string{Server: history.ClassPartition, Instance: history.ClassPartition}, Summary: "cut a member from its peers (or from `from`), or an instance from every server it talks to, both ways (iptables)", Targets: []Kind{Server, Instance}, NeedsFirewall: true, New: newIsolate})
	Register(Info{Name: "split",
		Example:  Example{Backend: "etcd", Fault: "{type: split, group: [etcd-1], target: instance-1}"},
		Does:     "the target and `group: [...]` on one side, the others on the other (an instance keeps the group and loses the rest)",
		Observed: "the rules dropped packets",
		Action:   ActCut, Options: SplitOptions{}, Classes: map[Kind]string{Server: history.ClassPartition, Instance: history.ClassPartition}, Summary: "split: the target and `group` on one side, the rest on the other (iptables)", Targets: []Kind{Server, Instance}, NeedsFirewall: true, New: newSplit})
	Register(Info{Name: "loss",
		Example:  Example{Backend: "etcd", Fault: "{type: loss, percent: 30, target: instance-1}"},
		Does:     "drop `percent` of the packets between the target and `from` (default: its peers), `direction` both, out or in (iptables' statistic match)",
		Observed: "the rules dropped packets",
		Action:   ActCut, Options: LossOptions{}, Classes: map[Kind]string{Server: history.ClassLossy, Instance: history.ClassLossy}, Summary: "drop `percent` of the packets between a member or instance and `from` (default: its peers), `direction` both, out or in (iptables statistic)", Targets: []Kind{Server, Instance}, NeedsFirewall: true, New: newLoss})
	Register(Info{Name: "one-way",
		Example:  Example{Backend: "etcd", Fault: "{type: one-way, to: [etcd-1], target: instance-1}"},
		Does:     "drop only what the target sends `to: [...]` (default: every peer)",
		Observed: "the rules dropped packets",
		Action:   ActCut, Options: OneWayOptions{}, Classes: map[Kind]string{Server: history.ClassPartition, Instance: history.ClassPartition}, Summary: "drop what a member or instance sends to `to` (default: every peer), one direction only (iptables)", Targets: []Kind{Server, Instance}, NeedsFirewall: true, New: newOneWay})
}

// cutFault cuts, for a resolved target, the directed pairs that plan
// returns: every packet, or a share p of them (loss).
type cutFault struct {
	plan  func(env Env, target Target) ([][2]Target, error)
	names []string // the servers its options name, as written
	p     float64  // 0 or 1: every packet
	proto string   // "", "tcp" or "udp"
	// prevent: the cut is meant to keep traffic from starting (observe:
	// no-traffic), so it is seen by its rules being in force to the end,
	// not by what they dropped (checker/MODEL.md §10).
	prevent bool
}

// observeMode reads a cut's observe option: drops (default: the rules
// must drop packets) or no-traffic (the rules must stay in force).
func observeMode(v string) (bool, error) {
	switch v {
	case "", "drops":
		return false, nil
	case "no-traffic":
		return true, nil
	}
	return false, fmt.Errorf("observe: %q is not drops or no-traffic", v)
}

func (f cutFault) Names() []string { return f.names }

// Protocol is the one protocol the cut is limited to ("": every one).
func (f cutFault) Protocol() string { return f.proto }

func (f cutFault) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	pairs, err := f.plan(env, target)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("%s has no peer to cut it from", target)
	}
	var cuts []Cut
	undo := func() error {
		var errs []error
		for _, c := range cuts {
			errs = append(errs, c.Undo())
		}
		return errors.Join(errs...)
	}
	lossy, _ := env.(Lossy)
	if f.p > 0 && f.p < 1 && lossy == nil {
		return nil, errors.New("this case cannot drop a share of the packets")
	}
	for _, p := range pairs {
		var c Cut
		var err error
		switch pc, ok := env.(ProtoCutter); {
		case f.p > 0 && f.p < 1:
			c, err = lossy.Lose(p[0], p[1], f.p)
		case f.proto != "" && ok:
			c, err = pc.CutProto(p[0], p[1], f.proto)
		case f.proto != "":
			err = fmt.Errorf("this case cannot cut %s alone", f.proto)
		default:
			c, err = env.Cut(p[0], p[1])
		}
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		cuts = append(cuts, c)
	}
	seen := fmt.Sprintf("%d DROP rule(s) in place", len(cuts))
	if f.p > 0 && f.p < 1 {
		seen = fmt.Sprintf("%d rule(s) dropping %.0f%% of the packets in place", len(cuts), 100*f.p)
	}
	if slices.Contains(f.names, RoleConnectedMember) {
		seen += fmt.Sprintf(" (%s with %s)", target, Targets(otherSides(pairs, target)))
	}
	return &Effect{
		Seen: seen,
		Check: func(ctx context.Context) (string, error) {
			return observeRules(ctx, cuts, func(total int64) (string, error) {
				if f.prevent {
					return fmt.Sprintf("its %d rule(s) stayed in force for the window (observe: no-traffic) and dropped %d packet(s): nothing crossed", len(cuts), total), nil
				}
				if total == 0 {
					return "", &IdleError{fmt.Sprintf("its %d rule(s) dropped no packet: nothing tried to cross the cut", len(cuts))}
				}
				return fmt.Sprintf("dropped %d packet(s)", total), nil
			})
		},
		Heal: func(context.Context) (string, error) { return "", undo() },
	}, nil
}

// LossOptions configure the loss fault.
type LossOptions struct {
	Percent float64 `yaml:"percent" doc:"share of the packets dropped, 0 < percent < 100"` // share of the packets dropped, 0 < percent < 100
	// From are the servers (of any kind) whose packets with the target are
	// dropped (default: its peers; for an instance, the servers it talks to).
	From []string `yaml:"from" doc:"servers cut from the target (default: its peers; for an instance, the servers it talks to; connected-member: the member the target instance is connected to at injection)"`
	// Direction: both (default), out (what the target sends), in (what it
	// receives).
	Direction string `yaml:"direction" doc:"both (default), out (what the target sends) or in"`
}

func newLoss(decode Decoder) (Fault, error) {
	var o LossOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Percent <= 0 || o.Percent >= 100 {
		return nil, fmt.Errorf("percent: %v is not between 0 and 100 (for 100, use isolate)", o.Percent)
	}
	switch o.Direction {
	case "", "both", "out", "in":
	default:
		return nil, fmt.Errorf("direction: %q is not both, out or in", o.Direction)
	}
	names := servers(o.From)
	return cutFault{names: o.From, p: o.Percent / 100, plan: func(env Env, target Target) ([][2]Target, error) {
		from, err := cutNames(env, target, names)
		if err != nil {
			return nil, err
		}
		var out [][2]Target
		for _, f := range from {
			if f.Is(target) {
				continue
			}
			if o.Direction != "in" {
				out = append(out, [2]Target{target, f})
			}
			if o.Direction != "out" {
				out = append(out, [2]Target{f, target})
			}
		}
		return out, nil
	}}, nil
}

// otherSides lists, once each and in order, the nodes paired with target.
func otherSides(pairs [][2]Target, target Target) []Target {
	var out []Target
	for _, p := range pairs {
		for _, n := range p {
			if !n.Is(target) && !slices.ContainsFunc(out, n.Is) {
				out = append(out, n)
			}
		}
	}
	return out
}

// servers reads the servers a fault's options name (from, to, group):
// their names, or connected-member (Target.Name RoleConnectedMember,
// unscoped) for the member the target instance is connected to.
func servers(names []string) []Target {
	out := make([]Target, len(names))
	for i, n := range names {
		out[i] = ServerTarget(n)
	}
	return out
}

// MemberFinder is implemented by Envs that can tell which server an
// instance's clients are connected to now (RoleConnectedMember).
type MemberFinder interface {
	ConnectedMember(instance Target) (Target, error)
}

// cutNames is the other side of a cut of target: the servers named, with
// connected-member standing for the member the target instance is
// connected to at injection, or the target's peers when names is empty.
func cutNames(env Env, target Target, names []Target) ([]Target, error) {
	if len(names) == 0 {
		return env.Peers(target), nil
	}
	out := make([]Target, 0, len(names))
	for _, n := range names {
		if n.Name != RoleConnectedMember {
			out = append(out, n)
			continue
		}
		mf, ok := env.(MemberFinder)
		if !ok {
			return nil, fmt.Errorf("%s: this run cannot tell which member %s is connected to", n, target)
		}
		m, err := mf.ConnectedMember(target)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func both(a, b []Target) [][2]Target {
	var out [][2]Target
	for _, x := range a {
		for _, y := range b {
			out = append(out, [2]Target{x, y}, [2]Target{y, x})
		}
	}
	return out
}

// IsolateOptions configure the isolate fault.
type IsolateOptions struct {
	// From are the servers to cut the target from, of any kind (default:
	// its peers): a Redis master from its Sentinels only, say, while the
	// clients and the replicas still reach it.
	From []string `yaml:"from" doc:"servers cut from the target (default: its peers; for an instance, the servers it talks to; connected-member: the member the target instance is connected to at injection)"`
	// Protocol cuts only "udp" (Consul's gossip) or "tcp" (its RPC);
	// default both.
	Protocol string `yaml:"protocol" doc:"cut only tcp or udp (default both)"`
	Observe  string `yaml:"observe" doc:"what shows the cut took effect: drops (default: its rules dropped packets) or no-traffic (its rules stayed in force: a cut meant to prevent traffic)"`
}

func newIsolate(decode Decoder) (Fault, error) {
	var o IsolateOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Protocol != "" && o.Protocol != "tcp" && o.Protocol != "udp" {
		return nil, fmt.Errorf("protocol: %q is not tcp or udp", o.Protocol)
	}
	prevent, err := observeMode(o.Observe)
	if err != nil {
		return nil, err
	}
	names := servers(o.From)
	return cutFault{names: o.From, proto: o.Protocol, prevent: prevent, plan: func(env Env, target Target) ([][2]Target, error) {
		from, err := cutNames(env, target, names)
		if err != nil {
			return nil, err
		}
		var others []Target
		for _, f := range from {
			if !f.Is(target) {
				others = append(others, f)
			}
		}
		return both([]Target{target}, others), nil
	}}, nil
}

// SplitOptions configure the split fault.
type SplitOptions struct {
	// Group are the peers on the target's side.
	Group   []string `yaml:"group" doc:"the peers on the target's side of the split"`
	Observe string   `yaml:"observe" doc:"drops (default) or no-traffic, as for isolate"`
}

func newSplit(decode Decoder) (Fault, error) {
	var o SplitOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	prevent, err := observeMode(o.Observe)
	if err != nil {
		return nil, err
	}
	group := servers(o.Group)
	return cutFault{names: o.Group, prevent: prevent, plan: func(env Env, target Target) ([][2]Target, error) {
		peers := env.Peers(target)
		side := []Target{target}
		for _, g := range group {
			if !slices.ContainsFunc(peers, g.Is) {
				return nil, fmt.Errorf("split: %s is not a peer of %s", g, target)
			}
			if !g.Is(target) {
				side = append(side, g)
			}
		}
		var other []Target
		for _, p := range peers {
			if !slices.ContainsFunc(side, p.Is) {
				other = append(other, p)
			}
		}
		if target.Kind == Instance {
			// An instance's side is the instance alone: it keeps the
			// group and loses the others. Members do not cut each other.
			return both([]Target{target}, other), nil
		}
		return both(side, other), nil
	}}, nil
}

// OneWayOptions configure the one-way fault.
type OneWayOptions struct {
	To      []string `yaml:"to" doc:"servers what the target sends to is dropped (default: every peer; connected-member: the member the target instance is connected to)"` // default: every peer
	Observe string   `yaml:"observe" doc:"drops (default) or no-traffic, as for isolate"`
}

func newOneWay(decode Decoder) (Fault, error) {
	var o OneWayOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	prevent, err := observeMode(o.Observe)
	if err != nil {
		return nil, err
	}
	names := servers(o.To)
	return cutFault{names: o.To, prevent: prevent, plan: func(env Env, target Target) ([][2]Target, error) {
		to, err := cutNames(env, target, names)
		if err != nil {
			return nil, err
		}
		var out [][2]Target
		for _, t := range to {
			out = append(out, [2]Target{target, t})
		}
		return out, nil
	}}, nil
}
