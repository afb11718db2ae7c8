package runner

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/wait"
)

// resolveRole waits until the role has a concrete target and returns it,
// remembering the role it was resolved from (Target.From): holder (a
// client inside its critical section: it has read the protected resource
// and not yet written), holder-of:<key>, a-waiter (a client with an
// acquire in flight), leader, follower (a live member of the leader's kind
// that is not the leader), master, and connected-member@<instance or
// instance role>. choice picks among candidates, so a seed replays the
// same pick when the same candidates exist.
//
// lane, for a fault of a side-by-side trial, keeps the pick among that
// lane's instances.
func (cr *caseRun) resolveRole(ctx context.Context, role faults.Target, lane int, choice uint64) (faults.Target, error) {
	if role.Kind == faults.Server && role.Name == faults.RoleConnectedMember {
		inst := role.Instance
		if role.ScopeRole() {
			t, err := cr.resolveRole(ctx, faults.Target{Kind: faults.Instance, Name: role.Scope}, lane, choice)
			if err != nil {
				return faults.Target{}, err
			}
			inst = t.Instance
		}
		for {
			m, err := cr.connectedMember(inst)
			if err != nil {
				return faults.Target{}, err
			}
			if m != "" {
				t := faults.ServerTarget(m)
				t.From = role.String()
				return t, nil
			}
			if !wait.Sleep(ctx, 10*time.Millisecond) {
				return faults.Target{}, fmt.Errorf("%s had no connection to any member before the case ended", inst)
			}
		}
	}
	for {
		var cands []faults.Target
		switch role.Name {
		case faults.RoleLeader, faults.RoleMaster:
			if name, err := cr.acts.Leader(ctx); err == nil {
				cands = []faults.Target{faults.ServerTarget(name)}
			}
		case faults.RoleFollower:
			cands = cr.followers(ctx)
		case faults.RoleWaiter:
			cr.liveMu.Lock()
			for proc := range cr.waiting {
				if p, err := history.ParseProc(proc); err == nil {
					cands = append(cands, faults.InstanceTarget(p.Instance))
				}
			}
			cr.liveMu.Unlock()
		default:
			for _, n := range cr.holders(role, cr.freshStore()) {
				cands = append(cands, faults.InstanceTarget(n))
			}
		}
		alive := cands[:0]
		for _, c := range cands {
			if w := cr.workers[c.Instance]; c.Kind == faults.Instance && (w == nil || !w.proc.Alive()) {
				continue
			}
			if lane > 0 && cr.laneOf(c.Instance) != lane {
				continue
			}
			alive = append(alive, c)
		}
		if len(alive) > 0 {
			sort.Slice(alive, func(i, j int) bool { return alive[i].String() < alive[j].String() })
			t := alive[choice%uint64(len(alive))]
			t.From = role.String()
			return t, nil
		}
		if !wait.Sleep(ctx, time.Millisecond) {
			return faults.Target{}, fmt.Errorf("role %s could not be resolved before the case ended", role)
		}
	}
}

// followers lists the live members of the leader's kind that do not
// lead, when a leader is known.
func (cr *caseRun) followers(ctx context.Context) []faults.Target {
	leader, err := cr.acts.Leader(ctx)
	if err != nil {
		return nil
	}
	ls, ok := cr.acts.Server(leader)
	if !ok {
		return nil
	}
	var out []faults.Target
	for _, n := range cr.acts.Names() {
		if s, ok := cr.acts.Server(n); ok && n != leader && s.Kind == ls.Kind && s.Alive {
			out = append(out, faults.ServerTarget(n))
		}
	}
	return out
}

// resolveScope resolves, for a set of links scoped to an instance role
// (link:etcd-*@holder), the role once for every link of the set.
func (cr *caseRun) resolveScope(ctx context.Context, members []faults.Target, lane int, choice uint64) ([]faults.Target, error) {
	scope := faults.Target{Kind: faults.Instance, Name: members[0].Scope}
	inst, err := cr.resolveRole(ctx, scope, lane, choice)
	if err != nil {
		return nil, err
	}
	out := make([]faults.Target, len(members))
	for i, m := range members {
		out[i] = m.Scoped(inst.Instance)
		out[i].From = scope.Name
	}
	return out, nil
}

// connectedMember is the server instance inst's clients are connected to
// now, as the kernel lists its worker's established connections (matched
// to the addresses its routes dial, direct or through a proxy); "" while
// it has none (between reconnections), and an error when they go to
// several servers (a client that spreads its requests has no one member).
func (cr *caseRun) connectedMember(inst history.Instance) (string, error) {
	w := cr.workers[inst]
	if w == nil {
		return "", fmt.Errorf("connected member: no instance %s", inst)
	}
	conns, err := procgroup.Connections(w.proc.Pid())
	if err != nil {
		return "", fmt.Errorf("connected member of %s: %w", inst, err)
	}
	byAddr := map[string]string{}
	for _, r := range w.routes {
		if r.Name == links.Resource {
			continue
		}
		a := r.Addr
		if r.Via != "" {
			a = r.Via
		}
		byAddr[canonAddr(a)] = r.Name
	}
	var found []string
	for _, c := range conns {
		if name, ok := byAddr[canonAddr(c)]; ok && !slices.Contains(found, name) {
			found = append(found, name)
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s is connected to %s at once: its clients have no one member", inst, strings.Join(found, ", "))
}

// canonAddr writes an "ip:port" address the way the kernel's list gives
// it (an IPv4 address in its dotted form, never as IPv6).
func canonAddr(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(host); ip != nil {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		host = ip.String()
	}
	return net.JoinHostPort(host, port)
}

// holders lists the instances with a client inside its critical section
// (on the protected resource or in the store), for the holder role or
// holder-of:<key>: the one source both the role's resolution and the
// pause's check (plays) read. The resource sees its clients in real time;
// a store's critical section is known from the workers' events, up to a
// flush of their emitters late, so with fresh > 0 only a client whose
// store began less than fresh ago counts: one that still has most of its
// hold ahead, and has not left it unseen by the time a pause lands.
func (cr *caseRun) holders(role faults.Target, fresh time.Duration) []history.Instance {
	key, only := role.Key()
	inside := map[string]string{}
	if cr.res != nil {
		inside = cr.res.InCriticalSection()
	}
	now := monoclock.Since(cr.r.base)
	cr.liveMu.Lock()
	for proc, k := range cr.storing {
		if since, ok := cr.storeSince[proc]; fresh > 0 && ok && now-since > int64(fresh) {
			continue
		}
		inside[proc] = k
	}
	cr.liveMu.Unlock()
	var out []history.Instance
	for proc, k := range inside {
		p, err := history.ParseProc(proc)
		if err == nil && (!only || k == key) {
			out = append(out, p.Instance) // once per client inside: the pick weighs them
		}
	}
	return out
}

// plays reports whether t, resolved from a role, still plays it: for the
// holder roles, whether a client of the instance is still inside its
// critical section (faults.RoleKeeper).
func (cr *caseRun) plays(t faults.Target) bool {
	if t.From == "" {
		return true
	}
	role := faults.Target{Kind: faults.Instance, Name: t.From}
	if _, keyed := role.Key(); t.Kind != faults.Instance || (t.From != faults.RoleHolder && t.From != faults.RoleExecutor && !keyed) {
		return true // only the holders' roles can be left this fast
	}
	return slices.Contains(cr.holders(role, 0), t.Instance)
}

// freshStore is how recently a store must have begun for its client to be
// picked as a holder: half the shortest hold, so that the hold outlasts
// the events' lag; 0 (any) when holds are too short to leave that margin.
func (cr *caseRun) freshStore() time.Duration {
	h := cr.c.Workload.Hold
	shortest := h.Min.D()
	switch h.Dist {
	case "constant":
		shortest = h.Value.D()
	case "exponential":
		shortest = 0
	}
	if shortest < 10*time.Millisecond {
		return 0
	}
	return shortest / 2
}

// laneOf is the lane (1-based) instance n belongs to in a batch of
// side-by-side trials, 0 outside one.
func (cr *caseRun) laneOf(n history.Instance) int {
	if cr.c.Lanes < 2 || cr.c.LaneInstances < 1 || n < 1 {
		return 0
	}
	return (int(n)-1)/cr.c.LaneInstances + 1
}

// trialInstance is instance n's number within its trial (the numbers a
// scenario's workload overrides name): n itself, unless trials run side
// by side, each with LaneInstances instances of its own.
func (cr *caseRun) trialInstance(n history.Instance) int {
	if cr.c.Lanes < 2 || cr.c.LaneInstances < 1 {
		return int(n)
	}
	return (int(n)-1)%cr.c.LaneInstances + 1
}

// planSeed is the seed of the clients' plan in lane l (1-based; 0 for a
// case that is not a batch): the case's own plan_seed when it gives one
// (a replay), else one drawn from the run's seed, the case's position and
// the lane, so that side-by-side trials draw plans of their own.
func (cr *caseRun) planSeed(lane int) uint64 {
	if cr.c.PlanSeed != 0 {
		return cr.c.PlanSeed
	}
	s := cr.r.caseSeed(cr.idx)
	if lane > 1 {
		s += uint64(lane-1) * 0x9e3779b97f4a7c15
	}
	return s
}

// planSeeds lists the plan seed of each trial of the case, lane by lane.
func (cr *caseRun) planSeeds() []uint64 {
	if cr.c.Lanes < 2 {
		return []uint64{cr.planSeed(0)}
	}
	out := make([]uint64, cr.c.Lanes)
	for l := range out {
		out[l] = cr.planSeed(l + 1)
	}
	return out
}
