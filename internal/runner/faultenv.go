package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/jackc/pgx/v5"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
)

// faultCluster is what applying faults needs of a case's cluster, by
// server name: the live cluster (liveCluster), or a fake in the runner's
// tests. What only some deployments do is an interface of its own below.
type faultCluster interface {
	// Names lists the servers in start order; Server describes one.
	Names() []string
	Server(name string) (serverInfo, bool)
	// Stopped reports whether every process of a server's group is
	// stopped.
	Stopped(name string) (bool, error)
	Leader(ctx context.Context) (string, error)
	// Proxy is the toxiproxy proxy of a link ("redis-1",
	// "redis-1@instance-2", "resource"); RelayCounts the traffic of a
	// server-side link, when it has a relay.
	Proxy(link string) (*toxiclient.Proxy, error)
	RelayCounts(link string) (links.Counts, bool)
	Signal(name string, sig syscall.Signal) error
	Kill(name string) error
	Restart(ctx context.Context, name string) error
	// ServerEndpoint, InstanceEndpoint and InstanceIP are the two sides
	// of an address-level rule; DropSome makes one.
	ServerEndpoint(name string) (firewall.Endpoint, error)
	InstanceEndpoint(n int) firewall.Endpoint
	InstanceIP(n int) string
	DropSome(a, b firewall.Endpoint, p float64) (firewall.Cut, error)
}

// serverInfo is a server as the faults see it.
type serverInfo struct {
	Kind, Addr, IP string
	// Alive: its process runs (a server found on another host is alive
	// while its control plane says so).
	Alive bool
}

// The abilities of some deployments only: netem, cgroups, clocks, disks.
type (
	shapingCluster interface {
		Shape(ip string, to []string, delay, jitter time.Duration, loss float64) (firewall.Cut, error)
	}
	confiningCluster interface {
		Confine(name, ctrl string, settings [][2]string) (cgroup.Confined, error)
		DataDevice(name string) (string, error)
	}
	clockCluster interface {
		JumpClock(name string, d time.Duration) error
		DriftClock(name string, rate float64) error
	}
	diskCluster interface {
		DiskFull(name string, full bool) (int64, error)
		DiskRefused(name string) (int64, error)
		PowerLoss(name string) (powerfs.Loss, error)
	}
)

// liveCluster is a running *cluster.Cluster as a faultCluster.
type liveCluster struct{ *cluster.Cluster }

func (c liveCluster) Server(name string) (serverInfo, bool) {
	s := c.Cluster.Server(name)
	if s == nil {
		return serverInfo{}, false
	}
	p := s.Process()
	return serverInfo{Kind: s.Spec.Kind, Addr: s.Addr, IP: s.IP, Alive: p != nil && p.Alive()}, true
}

func (c liveCluster) Stopped(name string) (bool, error) {
	s := c.Cluster.Server(name)
	if s == nil || s.Process() == nil {
		return false, fmt.Errorf("no running server %s", name)
	}
	return s.Process().Stopped()
}

func (c liveCluster) Confine(name, ctrl string, settings [][2]string) (cgroup.Confined, error) {
	s := c.Cluster.Server(name)
	if s == nil || s.Process() == nil || !s.Process().Alive() {
		return nil, fmt.Errorf("confine %s: no running process", name)
	}
	return s.Process().Confine(ctrl, settings)
}

// faultEnv gives one fault access to the running case (faults.Env, and
// the optional abilities the faults look for).
type faultEnv struct {
	cr    *caseRun
	fault string
}

// node is a server or an instance of the case, resolved from its target
// once: the one place a fault's environment tells the two apart.
type node struct {
	t faults.Target
	w *workerProc // an instance, or nil for a server
}

// node resolves a server's or an instance's target.
func (e *faultEnv) node(t faults.Target) (node, error) {
	switch t.Kind {
	case faults.Instance:
		if w := e.cr.workers[t.Instance]; w != nil {
			return node{t: t, w: w}, nil
		}
	case faults.Server:
		if _, ok := e.cr.acts.Server(t.Name); ok {
			return node{t: t}, nil
		}
	}
	return node{}, fmt.Errorf("no server or instance %s", t)
}

// ip is the address of the node's host.
func (e *faultEnv) ip(n node) string {
	if n.w != nil {
		return e.cr.acts.InstanceIP(int(n.w.n))
	}
	s, _ := e.cr.acts.Server(n.t.Name)
	return s.IP
}

func (e *faultEnv) Link(t faults.Target) (*toxiclient.Proxy, error) {
	p, err := e.cr.acts.Proxy(t.Link())
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", t.Link(), err)
	}
	return p, nil
}

// Signal signals an instance's process group, or a server's through its
// deployment (which refuses a targets file's).
func (e *faultEnv) Signal(t faults.Target, sig syscall.Signal) error {
	n, err := e.node(t)
	switch {
	case err != nil:
		return fmt.Errorf("signal: %w", err)
	case n.w != nil:
		err = n.w.proc.Signal(sig)
	default:
		err = e.cr.acts.Signal(t.Name, sig)
	}
	if errors.Is(err, procgroup.ErrExited) {
		return fmt.Errorf("%w: %w", err, faults.ErrGone)
	}
	return err
}

// Kill kills an instance, or a server through its deployment, recording
// which fault did (faults.KillRecord).
func (e *faultEnv) Kill(t faults.Target) error {
	n, err := e.node(t)
	if err == nil {
		e.cr.noteKill(t, e.fault)
	}
	switch {
	case err != nil:
		return fmt.Errorf("kill: %w", err)
	case n.w != nil:
		n.w.mu.Lock()
		n.w.killedBy = e.fault
		n.w.mu.Unlock()
		return n.w.proc.Kill(5 * time.Second)
	}
	return e.cr.acts.Kill(t.Name)
}

// KilledBy names the fault of the case that killed t's process at or
// after since, "" when none did (faults.KillRecord).
func (e *faultEnv) KilledBy(t faults.Target, since time.Time) string {
	e.cr.killMu.Lock()
	defer e.cr.killMu.Unlock()
	if k, ok := e.cr.killedBy[t.String()]; ok && !k.at.Before(since) {
		return k.fault
	}
	return ""
}

func (e *faultEnv) Restart(ctx context.Context, t faults.Target) error {
	return e.cr.acts.Restart(ctx, t.Name)
}

func (e *faultEnv) Server(t faults.Target) (string, faults.ServerKind, error) {
	s, ok := e.cr.acts.Server(t.Name)
	if t.Kind != faults.Server || !ok {
		return "", faults.ServerKind{}, fmt.Errorf("no server %s", t)
	}
	return s.Addr, cluster.FaultKind(s.Kind), nil
}

// Peers lists, for a server, every other server of the cluster; for an
// instance, the servers its clients dial.
func (e *faultEnv) Peers(t faults.Target) []faults.Target {
	var out []faults.Target
	if n, err := e.node(t); err == nil && n.w != nil {
		for _, r := range n.w.routes {
			if r.Name != links.Resource {
				out = append(out, faults.ServerTarget(r.Name))
			}
		}
		return out
	}
	for _, name := range e.cr.acts.Names() {
		if name != t.Name {
			out = append(out, faults.ServerTarget(name))
		}
	}
	return out
}

// Cut drops packets from one server or instance to another. Between an
// instance and a server it drops what goes to (or comes from) the address
// the instance really dials: the server, or the proxy it is routed through.
func (e *faultEnv) Cut(from, to faults.Target) (faults.Cut, error) {
	a, b, err := e.endpoints(from, to)
	if err != nil {
		return nil, fmt.Errorf("cut %s -> %s: %w", from, to, err)
	}
	return e.cr.acts.DropSome(a, b, 1)
}

// Lose drops a share p of the packets from one server or instance to
// another (faults.Lossy).
func (e *faultEnv) Lose(from, to faults.Target, p float64) (faults.Cut, error) {
	a, b, err := e.endpoints(from, to)
	if err != nil {
		return nil, fmt.Errorf("loss %s -> %s: %w", from, to, err)
	}
	return e.cr.acts.DropSome(a, b, p)
}

// CutProto drops one protocol's packets from one server or instance to
// another (faults.ProtoCutter).
func (e *faultEnv) CutProto(from, to faults.Target, proto string) (faults.Cut, error) {
	a, b, err := e.endpoints(from, to)
	if err != nil {
		return nil, fmt.Errorf("cut %s %s -> %s: %w", proto, from, to, err)
	}
	if b.Port != 0 && proto != "tcp" {
		b.Port = 0 // a proxy's TCP port says nothing of UDP
	}
	b.Proto = proto
	return e.cr.acts.DropSome(a, b, 1)
}

// endpoints are the two sides of a rule from one node to another.
func (e *faultEnv) endpoints(from, to faults.Target) (firewall.Endpoint, firewall.Endpoint, error) {
	if from.Kind == faults.Instance {
		b, err := e.cr.dialAddr(from.Instance, to.Name)
		return e.cr.acts.InstanceEndpoint(int(from.Instance)), b, err
	}
	if to.Kind == faults.Instance {
		a, err := e.cr.dialAddr(to.Instance, from.Name)
		return a, e.cr.acts.InstanceEndpoint(int(to.Instance)), err
	}
	a, err := e.cr.acts.ServerEndpoint(from.Name)
	if err != nil {
		return a, a, err
	}
	b, err := e.cr.acts.ServerEndpoint(to.Name)
	return a, b, err
}

func (e *faultEnv) Stopped(t faults.Target) (bool, error) {
	n, err := e.node(t)
	switch {
	case err != nil:
		return false, err
	case n.w != nil:
		return n.w.proc.Stopped()
	}
	return e.cr.acts.Stopped(t.Name)
}

func (e *faultEnv) Traffic(ctx context.Context, link faults.Target) (links.Counts, error) {
	return e.cr.traffic(ctx, link)
}

func (e *faultEnv) Leader(ctx context.Context) (string, error) { return e.cr.acts.Leader(ctx) }

// Plays says whether a target resolved from a role still plays it
// (faults.RoleKeeper): whether the holder still holds.
func (e *faultEnv) Plays(t faults.Target) bool { return e.cr.plays(t) }

// ConnectedMember is the member instance is connected to now (for a cut's
// connected-member; faults.MemberFinder).
func (e *faultEnv) ConnectedMember(instance faults.Target) (faults.Target, error) {
	m, err := e.cr.connectedMember(instance.Instance)
	if err == nil && m == "" {
		err = fmt.Errorf("%s has no connection to any member now", instance)
	}
	return faults.ServerTarget(m), err
}

// healthy checks a target before a fault is injected into it.
func (e *faultEnv) healthy(t faults.Target) error {
	switch t.Kind {
	case faults.Instance:
		if w := e.cr.workers[t.Instance]; w == nil || !w.proc.Alive() {
			return fmt.Errorf("%s is not running", t)
		}
	case faults.Server:
		if s, ok := e.cr.acts.Server(t.Name); !ok || !s.Alive {
			return fmt.Errorf("%s is not running", t)
		}
	case faults.Link:
		if _, err := e.Link(t); err != nil {
			return err
		}
	}
	return nil
}

// PostgresConfig is how a fault connects to a PostgreSQL server as its
// administrator (faults.PostgresAdmin): user postgres, or the targets
// file's credentials.
func (e *faultEnv) PostgresConfig(addr string, timeout time.Duration) (*pgx.ConnConfig, error) {
	var creds *backends.Credentials
	if t := e.cr.r.sc.Targets; t != nil {
		creds = t.Auth["postgres"]
	}
	return backends.PostgresConfig(addr, creds, timeout)
}

// Shape puts netem on what a server or instance sends (faults.Shaper), in
// the modes whose servers and instances are hosts of their own.
func (e *faultEnv) Shape(t faults.Target, to []faults.Target, nm faults.Netem) (faults.Cut, error) {
	sc, ok := e.cr.acts.(shapingCluster)
	if !ok {
		return nil, fmt.Errorf("netem on %s: this case's servers and instances are no hosts of their own", t)
	}
	ip, err := e.hostIP(t)
	if err != nil {
		return nil, err
	}
	var dst []string
	for _, d := range to {
		a, err := e.hostIP(d)
		if err != nil {
			return nil, err
		}
		dst = append(dst, a)
	}
	sh, err := sc.Shape(ip, dst, nm.Delay, nm.Jitter, nm.Loss)
	if err != nil {
		return nil, fmt.Errorf("netem on %s: %w", t, err)
	}
	return sh, nil
}

// hostIP is the address of a server's or instance's host.
func (e *faultEnv) hostIP(t faults.Target) (string, error) {
	n, err := e.node(t)
	if err != nil {
		return "", err
	}
	return e.ip(n), nil
}

// Confine moves a server's or an instance's process group into a cgroup of
// the harness's own (faults.Confiner).
func (e *faultEnv) Confine(t faults.Target, ctrl string, settings [][2]string) (faults.Confined, error) {
	n, err := e.node(t)
	switch {
	case err != nil:
		return nil, fmt.Errorf("confine %s: %w", t, err)
	case n.w != nil && !n.w.proc.Alive():
		return nil, fmt.Errorf("confine %s: no running process", t)
	case n.w != nil:
		return n.w.proc.Confine(ctrl, settings)
	}
	cc, ok := e.cr.acts.(confiningCluster)
	if !ok {
		return nil, fmt.Errorf("confine %s: this case's servers cannot be confined here", t)
	}
	return cc.Confine(t.Name, ctrl, settings)
}

// DataDevice is the disk holding a server's data directory.
func (e *faultEnv) DataDevice(t faults.Target) (string, error) {
	cc, ok := e.cr.acts.(confiningCluster)
	if !ok {
		return "", fmt.Errorf("%s: this case's servers' disks are not reached here", t)
	}
	return cc.DataDevice(t.Name)
}

// JumpClock moves a server's wall clock (faults.ClockJumper).
func (e *faultEnv) JumpClock(t faults.Target, d time.Duration) error {
	cc, ok := e.cr.acts.(clockCluster)
	if !ok {
		return fmt.Errorf("clock jump on %s: this case's clocks are not moved here", t)
	}
	return cc.JumpClock(t.Name, d)
}

// DriftClock sets the pace of a server's wall clock (faults.ClockDrifter).
func (e *faultEnv) DriftClock(t faults.Target, rate float64) error {
	cc, ok := e.cr.acts.(clockCluster)
	if !ok {
		return fmt.Errorf("clock drift on %s: this case's clocks are not moved here", t)
	}
	return cc.DriftClock(t.Name, rate)
}

// DiskFull fills a server's disk, or frees it (faults.DiskFiller).
func (e *faultEnv) DiskFull(t faults.Target, full bool) (int64, error) {
	dc, ok := e.cr.acts.(diskCluster)
	if !ok {
		return 0, errors.New("this case's servers have no disk layer")
	}
	return dc.DiskFull(t.Name, full)
}

// DiskRefused is how many writes a server's full disk refused so far.
func (e *faultEnv) DiskRefused(t faults.Target) (int64, error) {
	dc, ok := e.cr.acts.(diskCluster)
	if !ok {
		return 0, errors.New("this case's servers have no disk layer")
	}
	return dc.DiskRefused(t.Name)
}

// PowerLoss kills a server and discards what it never fsynced
// (faults.PowerCutter).
func (e *faultEnv) PowerLoss(t faults.Target) (int64, int, error) {
	dc, ok := e.cr.acts.(diskCluster)
	if !ok {
		return 0, 0, errors.New("this case's servers have no disk layer")
	}
	e.cr.noteKill(t, e.fault) // a power loss kills the server's process
	loss, err := dc.PowerLoss(t.Name)
	return loss.Bytes, loss.Files, err
}

// dialAddr is the address instance n reaches server name at: the proxy it
// is routed through, or the server itself. An address-level cut between an
// instance and a server must drop packets to and from this address.
func (cr *caseRun) dialAddr(n history.Instance, name string) (firewall.Endpoint, error) {
	w := cr.workers[n]
	if w == nil {
		return firewall.Endpoint{}, fmt.Errorf("no %s", n)
	}
	for _, r := range w.routes {
		if r.Name != name {
			continue
		}
		if r.Via == "" {
			host, _, _ := strings.Cut(r.Addr, ":")
			return firewall.Endpoint{IP: host}, nil
		}
		host, port, _ := strings.Cut(r.Via, ":")
		pn, _ := strconv.Atoi(port)
		return firewall.Endpoint{IP: host, Port: pn}, nil
	}
	return firewall.Endpoint{}, fmt.Errorf("%s has no route to %s", n, name)
}

// Proxy is the proxy of a link, as the cluster named it.
func (c liveCluster) Proxy(link string) (*toxiclient.Proxy, error) { return c.Toxi.Get(link) }
