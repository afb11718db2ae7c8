package runner

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockbench/lockbench/backends"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/internal/wait"
)

// FaultRecord is one line of faults.jsonl: a scheduled fault, the window in
// which it was really in effect, and what was observed of it.
type FaultRecord struct {
	Case     string `json:"case"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Target   string `json:"target"`             // as written in the scenario
	Resolved string `json:"resolved,omitempty"` // the concrete target hit
	AtNs     int64  `json:"scheduled_at_ns"`    // since the case start
	ForNs    int64  `json:"scheduled_for_ns"`
	StartNs  int64  `json:"start_ns,omitempty"` // since the run base
	EndNs    int64  `json:"end_ns,omitempty"`
	Applied  bool   `json:"applied"`
	// Observed lists what was seen of the fault's effect: when applied,
	// while in force, and when healed.
	Observed []string `json:"observed,omitempty"`
	// Unobserved says which effect was expected and not seen: the fault
	// was applied but did nothing the run can show, so the case is invalid.
	Unobserved string `json:"unobserved,omitempty"`
	// Idle says that nothing used the fault's target while it was in
	// force: invalid alone, excused in a group (checker/MODEL.md §10).
	Idle      string `json:"idle,omitempty"`
	Emulated  string `json:"emulated,omitempty"` // how the fault was emulated, if it was
	Error     string `json:"error,omitempty"`
	HealError string `json:"heal_error,omitempty"`
}

// runFault waits for the fault's time, applies it, keeps it for its window,
// checks what it did, heals it, and records what really happened. choice
// seeds the pick among several candidates for a role target.
func (cr *caseRun) runFault(ctx context.Context, f *scenario.Fault, k int, choice uint64) {
	rec := FaultRecord{Case: cr.c.Name, Name: f.Name, Type: f.Type, Target: f.Target, AtNs: int64(f.At), ForNs: int64(f.For)}
	defer cr.r.recordFault(&rec)
	fail := func(err error) {
		cr.dirty.Store(true) // whatever half of it was applied may linger
		rec.Error = err.Error()
		cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultError, Fault: f.Name, Target: f.Target, Err: rec.Error})
	}
	due := time.Duration(cr.start + int64(f.At) - monoclock.Since(cr.r.base))
	if !wait.Sleep(ctx, due) {
		fail(errors.New("the case ended before the fault's time"))
		return
	}
	var (
		target  string
		members []string
		eff     *faults.Effect
		src     int
		t0      int64
	)
	// A pause of the holder must stop a holder: a client can finish its
	// critical section between the role's resolution and the SIGSTOP, and
	// the fault would then pause an instance that holds nothing. The pause
	// is then undone at once and the role resolved again (a few times at
	// most: a case whose holders always get away is invalid, not ✓).
	for attempt := 1; ; attempt++ {
		target = f.Target
		if faults.IsRole(target) {
			var err error
			if target, err = cr.resolveRole(ctx, target, f.Lane, choice); err != nil {
				fail(err)
				return
			}
		}
		members = []string{target}
		if len(f.Targets) > 1 {
			members = append([]string(nil), f.Targets...)
		}
		// Links scoped to an instance role (link:etcd-*@holder): the role
		// is resolved once, for every link of the set.
		if t := faults.ParseTarget(members[0]); t.Kind == faults.Link && t.Role() {
			inst, err := cr.resolveRole(ctx, t.Scope, f.Lane, choice)
			if err != nil {
				fail(err)
				return
			}
			for i, m := range members {
				mt := faults.ParseTarget(m)
				mt.Scope = inst
				members[i] = mt.String()
			}
			target = strings.Join(members, ",")
		}
		rec.Resolved = target
		env := &faultEnv{cr: cr, fault: f.Name}
		for _, m := range members {
			if err := env.healthy(m); err != nil {
				fail(fmt.Errorf("target not healthy before injection: %w", err))
				return
			}
		}
		// The fault-start mark carries the instant the fault began to be
		// applied (a kill ends a hold then, not when the process is
		// reaped), so the merger is held at that instant until the mark is
		// pushed.
		src = -(cr.idx*1000 + 500 + k)
		t0 = cr.r.m.addSource(src)
		var err error
		eff, err = startAll(context.WithoutCancel(ctx), f.Fault, env, members)
		if err != nil {
			cr.r.m.removeSource(src)
			fail(err)
			return
		}
		left := cr.holderLeft(f, target)
		if left == "" {
			if attempt > 1 {
				rec.Observed = append(rec.Observed, fmt.Sprintf("the holder was resolved %d times: %d had left its critical section when it stopped", attempt, attempt-1))
			}
			break
		}
		_, herr := eff.Heal(context.WithoutCancel(ctx))
		cr.r.m.removeSource(src)
		if herr != nil {
			fail(fmt.Errorf("%s; resuming it: %w", left, herr))
			return
		}
		if attempt == maxHolderTries {
			fail(fmt.Errorf("%s, %d times: no holder could be paused while it held", left, attempt))
			return
		}
		fmt.Fprintf(cr.r.log, "  fault %s: %s; resumed, resolving the holder again\n", f.Name, left)
	}
	rec.Applied, rec.StartNs = true, t0
	rec.Emulated = eff.Emulated
	if eff.Seen != "" {
		rec.Observed = append(rec.Observed, eff.Seen)
	}
	cr.r.m.push(src, &history.Event{T: t0, Type: history.Mark, F: history.MarkFaultStart, Fault: f.Name, Target: target, Observed: eff.Seen})
	cr.r.m.removeSource(src)
	cr.r.fault.Store(fmt.Sprintf("%s (%s %s)", f.Name, f.Type, target))
	fmt.Fprintf(cr.r.log, "  fault %s: %s on %s for %s: %s\n", f.Name, f.Type, target, f.For, eff.Seen)
	wait.Sleep(ctx, f.For)
	hctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if eff.Check != nil {
		obs, err := eff.Check(hctx)
		switch {
		case faults.IsIdle(err):
			rec.Idle = err.Error()
			fmt.Fprintf(cr.r.log, "  fault %s: idle: %v\n", f.Name, err)
			cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultIdle, Fault: f.Name, Target: target, Err: rec.Idle})
		case err != nil:
			rec.Unobserved = err.Error()
			fmt.Fprintf(cr.r.log, "  fault %s: effect not observed: %v\n", f.Name, err)
			cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultUnobserved, Fault: f.Name, Target: target, Err: rec.Unobserved})
		case obs != "":
			rec.Observed = append(rec.Observed, obs)
		}
	}
	healed, err := eff.Heal(hctx)
	if info, _ := faults.Lookup(f.Type); info.Lasting && faults.KindOf(target) == faults.Server {
		cr.dirty.Store(true) // a restarted, promoted or re-clocked server
	}
	if err != nil {
		cr.dirty.Store(true)
		rec.HealError = err.Error()
		fmt.Fprintf(cr.r.log, "  fault %s: heal: %v\n", f.Name, err)
	} else if healed != "" {
		rec.Observed = append(rec.Observed, healed)
	}
	rec.EndNs = monoclock.Since(cr.r.base)
	cr.healed(rec.EndNs)
	cr.r.fault.Store("")
	cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultEnd, Fault: f.Name, Target: target, Err: rec.HealError, Observed: healed})
}

// startAll applies a fault to each of its targets (one, or a set) and
// returns one Effect for all of them (checker/MODEL.md §10): seen when
// every target's effect was, observed while in force when at least one
// target was observed and none failed (an idle target among observed ones
// is named, not fatal), idle when every target was, healed when every
// target was. A target that cannot be applied undoes the ones before it.
func startAll(ctx context.Context, f faults.Fault, env faults.Env, targets []string) (*faults.Effect, error) {
	if len(targets) == 1 {
		return f.Start(ctx, env, targets[0])
	}
	var effs []*faults.Effect
	// The members heal at once: a member of a quorum restarted alone (a
	// power loss or a kill of a whole etcd cluster) would wait for the
	// others to answer before it does.
	healAll := func(ctx context.Context) (string, error) {
		errs := make([]error, len(effs))
		out := make([]string, len(effs))
		var wg sync.WaitGroup
		for i, e := range effs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i], errs[i] = e.Heal(ctx)
			}()
		}
		wg.Wait()
		var seen []string
		for _, s := range out {
			if s != "" {
				seen = append(seen, s)
			}
		}
		return strings.Join(seen, "; "), errors.Join(errs...)
	}
	var seen []string
	emulated := ""
	for _, t := range targets {
		e, err := f.Start(ctx, env, t)
		if err != nil {
			_, herr := healAll(ctx)
			return nil, errors.Join(fmt.Errorf("%s: %w", t, err), herr)
		}
		effs = append(effs, e)
		seen = append(seen, e.Seen)
		if emulated == "" {
			emulated = e.Emulated
		}
	}
	check := func(ctx context.Context) (string, error) {
		var observed, idle, failed []string
		for i, e := range effs {
			if e.Check == nil {
				observed = append(observed, targets[i])
				continue
			}
			s, err := e.Check(ctx)
			switch {
			case faults.IsIdle(err):
				idle = append(idle, targets[i])
			case err != nil:
				failed = append(failed, fmt.Sprintf("%s: %v", targets[i], err))
			default:
				observed = append(observed, fmt.Sprintf("%s: %s", targets[i], s))
			}
		}
		switch {
		case len(failed) > 0:
			return "", errors.New(strings.Join(failed, "; "))
		case len(observed) == 0:
			return "", &faults.IdleError{Msg: fmt.Sprintf("nothing used any of %s while the fault was in force", strings.Join(targets, ", "))}
		}
		out := strings.Join(observed, "; ")
		if len(idle) > 0 {
			out += fmt.Sprintf("; idle (nothing used them): %s", strings.Join(idle, ", "))
		}
		return out, nil
	}
	return &faults.Effect{Seen: strings.Join(seen, "; "), Check: check, Heal: healAll, Emulated: emulated}, nil
}

// resolveRole waits until the role has a concrete target and returns it:
// holder (a client inside its critical section: it has read the protected
// resource and not yet written), holder-of:<key>, a-waiter (a client with an
// acquire in flight), leader, follower (a live member of the leader's kind
// that is not the leader) or master. choice picks among candidates, so a
// seed replays the same pick when the same candidates exist.
//
// lane, for a fault of a side-by-side trial, keeps the pick among that
// lane's instances.
func (cr *caseRun) resolveRole(ctx context.Context, role string, lane int, choice uint64) (string, error) {
	if pt := faults.ParseTarget(role); pt.Kind == faults.Server && pt.Name == faults.RoleConnectedMember {
		inst := pt.Scope
		if faults.IsRole(inst) {
			var err error
			if inst, err = cr.resolveRole(ctx, inst, lane, choice); err != nil {
				return "", err
			}
		}
		for {
			m, err := cr.connectedMember(inst)
			if err != nil || m != "" {
				return m, err
			}
			if !wait.Sleep(ctx, 10*time.Millisecond) {
				return "", fmt.Errorf("%s had no connection to any member before the case ended", inst)
			}
		}
	}
	for {
		var cands []string
		switch {
		case role == faults.RoleLeader || role == faults.RoleMaster:
			if name, err := cr.cl.Leader(ctx); err == nil {
				cands = []string{name}
			}
		case role == faults.RoleFollower:
			if leader, err := cr.cl.Leader(ctx); err == nil {
				kind := cr.cl.Server(leader).Spec.Kind
				for _, n := range cr.cl.Names() {
					if s := cr.cl.Server(n); n != leader && s.Spec.Kind == kind && s.Process().Alive() {
						cands = append(cands, n)
					}
				}
			}
		case role == faults.RoleWaiter:
			cr.liveMu.Lock()
			for proc := range cr.waiting {
				cands = append(cands, instanceOf(proc))
			}
			cr.liveMu.Unlock()
		default:
			cands = append(cands, cr.holders(role)...)
		}
		alive := cands[:0]
		for _, c := range cands {
			if w := cr.workers[c]; w != nil && !w.proc.Alive() {
				continue
			}
			if lane > 0 && cr.laneOf(c) != lane {
				continue
			}
			alive = append(alive, c)
		}
		if len(alive) > 0 {
			sort.Strings(alive)
			return alive[choice%uint64(len(alive))], nil
		}
		if !wait.Sleep(ctx, time.Millisecond) {
			return "", fmt.Errorf("role %s could not be resolved before the case ended", role)
		}
	}
}

// connectedMember is the server instance inst's clients are connected to
// now, as the kernel lists its worker's established connections (matched
// to the addresses its routes dial, direct or through a proxy); "" while
// it has none (between reconnections), and an error when they go to
// several servers (a client that spreads its requests has no one member).
func (cr *caseRun) connectedMember(inst string) (string, error) {
	w := cr.workers[inst]
	if w == nil {
		return "", fmt.Errorf("connected member: no instance %s", inst)
	}
	conns, err := cluster.Connections(w.proc.Pid())
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

// ConnectedMember is the member instance is connected to now (for a cut's
// connected-member).
func (e *faultEnv) ConnectedMember(instance string) (string, error) {
	m, err := e.cr.connectedMember(instance)
	if err == nil && m == "" {
		err = fmt.Errorf("%s has no connection to any member now", instance)
	}
	return m, err
}

// instanceOf maps a client "i2c0" to its instance "instance-2".
func instanceOf(proc string) string {
	s := strings.TrimPrefix(proc, "i")
	if i := strings.IndexByte(s, 'c'); i >= 0 {
		s = s[:i]
	}
	if _, err := strconv.Atoi(s); err != nil {
		return ""
	}
	return "instance-" + s
}

// cutInstance splits "redis-1@instance-2" into "redis-1", 2, true.
func cutInstance(link string) (string, int, bool) {
	t := faults.ParseTarget("link:" + link)
	n, per := t.Instance()
	return t.Name, n, per
}

func (r *run) recordFault(rec *FaultRecord) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if err := r.faults.Encode(rec); err != nil {
		fmt.Fprintf(r.log, "write faults.jsonl: %v\n", err)
	}
}

// faultEnv gives one fault access to the running case.
type faultEnv struct {
	cr    *caseRun
	fault string
}

func (e *faultEnv) Link(name string) (*toxiclient.Proxy, error) {
	p, err := e.cr.cl.Toxi.Client.Proxy(name)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	return p, nil
}

// node is a server or an instance of the case, resolved from its name
// once: the one place a fault's environment tells the two apart.
type node struct {
	name string
	w    *workerProc     // an instance, or nil
	s    *cluster.Server // a server, or nil
}

// node resolves a server or instance name.
func (e *faultEnv) node(name string) (node, error) {
	if w := e.cr.workers[name]; w != nil {
		return node{name: name, w: w}, nil
	}
	if s := e.cr.cl.Server(name); s != nil {
		return node{name: name, s: s}, nil
	}
	return node{}, fmt.Errorf("no server or instance named %s", name)
}

// proc is the node's current process (a server's changes at a restart).
func (n node) proc() *cluster.Process {
	if n.w != nil {
		return n.w.proc
	}
	return n.s.Process()
}

// ip is the address of the node's host.
func (e *faultEnv) ip(n node) string {
	if n.w != nil {
		return e.cr.cl.InstanceIP(n.w.n)
	}
	return n.s.IP
}

// Signal signals an instance's process group, or a server's through its
// placement (which refuses a targets file's).
func (e *faultEnv) Signal(target string, sig syscall.Signal) error {
	n, err := e.node(target)
	switch {
	case err != nil:
		return fmt.Errorf("signal: %w", err)
	case n.w != nil:
		return n.w.proc.Signal(sig)
	}
	return e.cr.cl.Signal(target, sig)
}

// Kill kills an instance, recording which fault did, or a server through
// its placement.
func (e *faultEnv) Kill(target string) error {
	n, err := e.node(target)
	switch {
	case err != nil:
		return fmt.Errorf("kill: %w", err)
	case n.w != nil:
		n.w.mu.Lock()
		n.w.killedBy = e.fault
		n.w.mu.Unlock()
		return n.w.proc.Kill(5 * time.Second)
	}
	return e.cr.cl.Kill(target)
}

// DiskFull fills a server's disk, or frees it.
func (e *faultEnv) DiskFull(server string, full bool) (int64, error) {
	return e.cr.cl.DiskFull(server, full)
}

// DiskRefused is how many writes a server's full disk refused so far.
func (e *faultEnv) DiskRefused(server string) (int64, error) { return e.cr.cl.DiskRefused(server) }

// PowerLoss kills a server and discards what it never fsynced.
func (e *faultEnv) PowerLoss(server string) (int64, int, error) {
	loss, err := e.cr.cl.PowerLoss(server)
	return loss.Bytes, loss.Files, err
}

// Credentials is the targets file's credentials of a family, or nil
// (faults.Authenticated): a fault's own connection to a server uses them.
func (e *faultEnv) Credentials(family string) *backends.Credentials {
	if t := e.cr.r.sc.Targets; t != nil {
		return t.Auth[family]
	}
	return nil
}

func (e *faultEnv) Server(name string) (string, string, error) {
	s := e.cr.cl.Server(name)
	if s == nil {
		return "", "", fmt.Errorf("no server %q", name)
	}
	return s.Addr, s.Spec.Kind, nil
}

// Peers lists, for a server, every other server of the cluster; for an
// instance, the servers its clients dial.
func (e *faultEnv) Peers(name string) []string {
	if n, err := e.node(name); err == nil && n.w != nil {
		var out []string
		for _, r := range n.w.routes {
			if r.Name != links.Resource {
				out = append(out, r.Name)
			}
		}
		return out
	}
	var out []string
	for _, n := range e.cr.cl.Names() {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// Cut drops packets from one server or instance to another. Between an
// instance and a server it drops what goes to (or comes from) the address
// the instance really dials: the server, or the proxy it is routed through.
func (e *faultEnv) Cut(from, to string) (faults.Cut, error) {
	a, b, err := e.endpoints(from, to)
	if err != nil {
		return nil, fmt.Errorf("cut %s -> %s: %w", from, to, err)
	}
	return e.cr.cl.Drop(a, b)
}

func (e *faultEnv) endpoints(from, to string) (cluster.Endpoint, cluster.Endpoint, error) {
	inst := func(name string) (int, bool) {
		if n, err := e.node(name); err == nil && n.w != nil {
			return n.w.n, true
		}
		return 0, false
	}
	if n, ok := inst(from); ok {
		b, err := e.cr.dialAddr(n, to)
		return e.cr.cl.InstanceEndpoint(n), b, err
	}
	if n, ok := inst(to); ok {
		a, err := e.cr.dialAddr(n, from)
		return a, e.cr.cl.InstanceEndpoint(n), err
	}
	a, err := e.cr.cl.ServerEndpoint(from)
	if err != nil {
		return a, a, err
	}
	b, err := e.cr.cl.ServerEndpoint(to)
	return a, b, err
}

func (e *faultEnv) Restart(ctx context.Context, server string) error {
	return e.cr.cl.Restart(ctx, server)
}

func (e *faultEnv) Stopped(target string) (bool, error) {
	n, err := e.node(target)
	if err != nil {
		return false, err
	}
	return n.proc().Stopped()
}

func (e *faultEnv) Traffic(ctx context.Context, link string) (links.Counts, error) {
	return e.cr.traffic(ctx, link)
}

func (e *faultEnv) Leader(ctx context.Context) (string, error) { return e.cr.cl.Leader(ctx) }

// healthy checks a target before a fault is injected into it.
func (e *faultEnv) healthy(target string) error {
	switch faults.KindOf(target) {
	case faults.Instance, faults.Server:
		n, err := e.node(target)
		if err != nil || n.proc() == nil || !n.proc().Alive() {
			return fmt.Errorf("%s is not running", target)
		}
	case faults.Link:
		if _, err := e.Link(faults.ParseTarget(target).Link()); err != nil {
			return err
		}
	}
	return nil
}

// Shape puts netem on what a server or instance sends (network: hosts).
// It is faults.Shaper: a loopback case does not offer it (validation
// rejects netem there).
func (e *faultEnv) Shape(target string, to []string, n faults.Netem) (faults.Cut, error) {
	h := e.cr.cl.Hosts
	if h == nil {
		return nil, fmt.Errorf("netem on %s: the case does not run on hosts of their own (network: hosts)", target)
	}
	ip, err := e.hostIP(target)
	if err != nil {
		return nil, err
	}
	var dst []string
	for _, name := range to {
		d, err := e.hostIP(name)
		if err != nil {
			return nil, err
		}
		dst = append(dst, d)
	}
	sh, err := h.Shape(h.NS(ip), dst, n.Delay, n.Jitter, n.Loss)
	if err != nil {
		return nil, fmt.Errorf("netem on %s: %w", target, err)
	}
	return sh, nil
}

// hostIP is the address of a server's or instance's host.
func (e *faultEnv) hostIP(name string) (string, error) {
	n, err := e.node(name)
	if err != nil {
		return "", err
	}
	return e.ip(n), nil
}

// Lose drops a share p of the packets from one server or instance to
// another (faults.Lossy).
func (e *faultEnv) Lose(from, to string, p float64) (faults.Cut, error) {
	a, b, err := e.endpoints(from, to)
	if err != nil {
		return nil, fmt.Errorf("loss %s -> %s: %w", from, to, err)
	}
	return e.cr.cl.DropSome(a, b, p)
}

// Confine moves a server's or an instance's process group into a cgroup of
// the harness's own (faults.Confiner).
func (e *faultEnv) Confine(target, ctrl string, settings [][2]string) (faults.Confined, error) {
	var p *cluster.Process
	if n, err := e.node(target); err == nil {
		p = n.proc()
	}
	if p == nil || !p.Alive() {
		return nil, fmt.Errorf("confine %s: no running process", target)
	}
	if p.Container() != "" {
		return nil, fmt.Errorf("confine %s: a container; use the engine's own limits", target)
	}
	return cluster.ConfineProcess(p, ctrl, settings)
}

// DataDevice is the disk holding a server's data directory.
func (e *faultEnv) DataDevice(server string) (string, error) {
	s := e.cr.cl.Server(server)
	if s == nil {
		return "", fmt.Errorf("no server %s", server)
	}
	return cluster.DataDevice(s)
}

// CutProto drops one protocol's packets from one server or instance to
// another (faults.ProtoCutter).
func (e *faultEnv) CutProto(from, to, proto string) (faults.Cut, error) {
	a, b, err := e.endpoints(from, to)
	if err != nil {
		return nil, fmt.Errorf("cut %s %s -> %s: %w", proto, from, to, err)
	}
	if b.Port != 0 && proto != "tcp" {
		b.Port = 0 // a proxy's TCP port says nothing of UDP
	}
	b.Proto = proto
	return e.cr.cl.Drop(a, b)
}

// JumpClock moves a server's wall clock forward (faults.ClockJumper).
func (e *faultEnv) JumpClock(server string, d time.Duration) error {
	return e.cr.cl.JumpClock(server, d)
}

// DriftClock sets the pace of a server's wall clock (faults.ClockDrifter).
func (e *faultEnv) DriftClock(server string, rate float64) error {
	return e.cr.cl.DriftClock(server, rate)
}

// laneOf is the lane (1-based) an instance "instance-N" belongs to in a
// batch of side-by-side trials, 0 outside one.
func (cr *caseRun) laneOf(instance string) int {
	var n int
	if cr.c.Lanes < 2 || cr.c.LaneInstances < 1 {
		return 0
	}
	if _, err := fmt.Sscanf(instance, "instance-%d", &n); err != nil || n < 1 {
		return 0
	}
	return (n-1)/cr.c.LaneInstances + 1
}

// maxHolderTries bounds how often a pause of the holder resolves the role
// again because the client it stopped had just left its critical section.
const maxHolderTries = 10

// holderLeft says, for a pause whose target is the holder role, why the
// instance it stopped holds nothing ("" when a client of it is still
// inside its critical section, or when the fault is not such a pause).
// The instance is stopped, so what it had sent before the stop is given a
// moment to arrive before the critical sections are looked at.
func (cr *caseRun) holderLeft(f *scenario.Fault, target string) string {
	role := f.Target
	if f.Type != "pause" || (role != faults.RoleHolder && !strings.HasPrefix(role, faults.RoleHolderOf)) {
		return ""
	}
	time.Sleep(20 * time.Millisecond)
	if slices.Contains(cr.holders(role), target) {
		return ""
	}
	return target + " had left its critical section when it stopped"
}

// holders lists the instances with a client inside its critical section
// (on the protected resource or in the store), for the holder role or
// holder-of:<key>: the one source both the role's resolution and the
// pause's check read.
func (cr *caseRun) holders(role string) []string {
	key, only := strings.CutPrefix(role, faults.RoleHolderOf)
	inside := cr.res.InCriticalSection()
	cr.liveMu.Lock()
	for proc, k := range cr.storing {
		inside[proc] = k
	}
	cr.liveMu.Unlock()
	var out []string
	for proc, k := range inside {
		if !only || k == key {
			out = append(out, instanceOf(proc))
		}
	}
	return out
}
