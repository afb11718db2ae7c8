package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/powerfs"
	"github.com/lockbench/lockbench/internal/wait"
)

// Server is one running lock server.
type Server struct {
	Spec backends.ServerSpec
	IP   string // its own loopback address, in the run's slot
	Addr string // its real client address (IP:port)
	// Proxy is the shared toxiproxy proxy of its client link, made only
	// when a fault of the case acts on that link (see ClientProxy).
	Proxy   *toxiclient.Proxy
	Dir     string // private data directory
	LogPath string
	// NS is the network namespace the server runs in (hosts mode), or "".
	NS string
	// command builds the process to run (fresh for every (re)start); ready
	// waits until the server answers.
	command func() (*exec.Cmd, error)
	ready   func(ctx context.Context, p *Process) error

	power *powerfs.FS // its data dir's power-loss layer, if any

	mu   sync.Mutex
	proc *Process
}

// Process returns the server's current process.
func (s *Server) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// setProcess makes p the server's current process (at a start or restart).
func (s *Server) setProcess(p *Process) {
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// Cluster is the set of servers of one case, on the addresses of the run's
// own slot, with toxiproxy proxies on the links that faults act on. Close
// tears everything down and is safe to call more than once.
type Cluster struct {
	RunID  string
	LogDir string
	Slot   *Slot
	Toxi   *Toxi
	// Firewall cuts traffic between member addresses (created on first
	// use); in hosts mode Hosts does, with rules in each host's namespace.
	Firewall *Firewall
	// Hosts is non-nil in hosts mode (every server and instance in a
	// network namespace of its own) and on a compose topology (each
	// container's): what netem shapes.
	Hosts   *Hosts
	dataDir string
	// place is where the servers and instances run (see placement).
	place placement

	mu      sync.Mutex
	servers map[string]*Server
	order   []string
	closed  bool
	nextIP  int
	// proxied names the server-side links (etcd-1-peer, redis-1-repl) to
	// route through toxiproxy; the others are direct. relays count their
	// traffic.
	proxied  map[string]bool
	relays   map[string]*links.Relay
	faketime map[string]bool
	power    bool
}

// Options configure a cluster.
type Options struct {
	// Proxied names the server-side links that faults of the case act on
	// (etcd-1-peer, redis-1-repl): only those go through toxiproxy.
	Proxied []string
	// Hosts puts every server, and every instance started through
	// HostCommand, on a network namespace of its own (see Hosts).
	Hosts bool
	// External names servers lockbench does not start (bench run
	// -targets): Start only checks that each answers on TCP, and nothing
	// ever signals, kills or firewalls them.
	External map[string]string
	// ExternalToxi, with External, drives an existing toxiproxy (its API
	// URL and the host its proxies listen on) instead of starting one.
	ExternalToxi *ExternalToxi
	// Faketime names the servers whose wall clock a fault will move: they
	// run under libfaketime (see JumpClock).
	Faketime []string
	// DiskLayer puts every server's data dir on the powerfs layer (see
	// PowerLoss and DiskFull): a power-loss or disk-full fault needs it.
	DiskLayer bool
	// Control, with External, gives some of the external servers a
	// control plane (SSH to their hosts): the server faults then act on
	// them (see Control).
	Control map[string]*Control
	// Compose, with External, is the docker compose topology the external
	// servers are services of: lockbench may then pause, kill, restart and
	// cut them through the engine, and runs worker instances as containers
	// on its network.
	Compose *Compose
}

// New takes an address slot for the cluster and starts its toxiproxy
// server, on loopback. Server logs go to logDir; data lives in a private
// temp dir removed by Close.
func New(runID, logDir string, proxied ...string) (*Cluster, error) {
	return NewWith(runID, logDir, Options{Proxied: proxied})
}

// NewWith is New with options.
func NewWith(runID, logDir string, o Options) (*Cluster, error) {
	if o.Hosts && o.External != nil {
		return nil, errors.New("hosts mode places the servers lockbench starts; a targets file's it does not")
	}
	if o.Compose != nil && o.External == nil {
		return nil, errors.New("a compose topology's servers are named by a targets file (Options.External)")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	CleanStale()
	CleanStaleCgroups()
	if err := CleanStaleChains(); err != nil {
		return nil, fmt.Errorf("remove iptables chains of dead runs: %w", err)
	}
	slot, err := AcquireSlot()
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", fmt.Sprintf("lockbench-data-%d-", os.Getpid()))
	if err != nil {
		slot.Release()
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// Servers that refuse to run as root (PostgreSQL) must reach their
	// data dir below this one.
	if err := os.Chmod(dataDir, 0o755); err != nil {
		os.RemoveAll(dataDir)
		slot.Release()
		return nil, fmt.Errorf("data dir: %w", err)
	}
	var hosts *Hosts
	if o.Hosts {
		slot.hosts = true
		if hosts, err = NewHosts(slot); err != nil {
			os.RemoveAll(dataDir)
			slot.Release()
			return nil, err
		}
	}
	var t *Toxi
	if o.ExternalToxi != nil {
		t, err = ConnectToxi(*o.ExternalToxi, fmt.Sprintf("lockbench-%s-", runID))
	} else {
		t, err = StartToxi(slot.Harness())
	}
	if err != nil {
		if hosts != nil {
			hosts.Close()
		}
		os.RemoveAll(dataDir)
		slot.Release()
		return nil, err
	}
	c := &Cluster{RunID: runID, LogDir: logDir, Slot: slot, Toxi: t, Firewall: NewFirewall(), Hosts: hosts, dataDir: dataDir,
		servers: map[string]*Server{}, proxied: map[string]bool{}, relays: map[string]*links.Relay{}}
	ext := external{addrs: o.External, slot: slot, fw: c.Firewall}
	switch {
	case o.Compose != nil:
		c.Hosts = containerHosts()
		cleanStaleContainers(slot.N)
		c.place = &onCompose{external: ext, cfg: o.Compose, h: c.Hosts, runID: runID}
	case o.External != nil && len(o.Control) > 0 && controlPlane(o.Control) == ModeKubernetes:
		if err := KubernetesAvailable(); err != nil {
			c.Close()
			return nil, err
		}
		if c.place, err = kubePlane(ext, o.Control, runID); err != nil {
			c.place = &ext
			c.Close()
			return nil, err
		}
	case o.External != nil && len(o.Control) > 0:
		c.place = newOnSSH(ext, o.Control)
	case o.External != nil:
		c.place = &ext
	case hosts != nil:
		c.place = &onHosts{loopback: loopback{slot: slot, fw: c.Firewall}, h: hosts}
	default:
		c.place = &loopback{slot: slot, fw: c.Firewall}
	}
	c.power = o.DiskLayer
	c.faketime = map[string]bool{}
	for _, n := range o.Faketime {
		c.faketime[n] = true
	}
	for _, l := range o.Proxied {
		c.proxied[l] = true
	}
	return c, nil
}

// controlPlane is the mode of a targets file's control sections: every
// one uses the same plane (targets.Load checks it).
func controlPlane(ctl map[string]*Control) string {
	for _, c := range ctl {
		if c.Plane() == "kubernetes" {
			return ModeKubernetes
		}
	}
	return ModeSSH
}

// routed makes the server-side link name go through a proxy when a fault
// acts on it, and returns the address to advertise for it: a relay that
// counts the link's traffic in front of the proxy, or addr itself.
func (c *Cluster) routed(name, addr string) (string, error) {
	if !c.proxied[name] {
		return addr, nil
	}
	p, err := c.proxy(name, addr)
	if err != nil {
		return "", err
	}
	r, err := links.NewRelay(c.Slot.Harness(), name, p.Listen)
	if err != nil {
		return "", fmt.Errorf("relay for %s: %w", name, err)
	}
	c.mu.Lock()
	c.relays[name] = r
	c.mu.Unlock()
	return r.Addr(), nil
}

// RelayCounts returns the traffic of a server-side link, if it has a relay.
func (c *Cluster) RelayCounts(name string) (links.Counts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.relays[name]
	if !ok {
		return links.Counts{}, false
	}
	return r.Counts(), true
}

// ClientProxy returns the shared proxy of a server's client link, making it
// on first use.
func (c *Cluster) ClientProxy(name string) (*toxiclient.Proxy, error) {
	s := c.Server(name)
	if s == nil {
		return nil, fmt.Errorf("proxy for %s: no such server", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Proxy == nil {
		p, err := c.proxy(name, s.Addr)
		if err != nil {
			return nil, err
		}
		s.Proxy = p
	}
	return s.Proxy, nil
}

// Start launches every server in specs, waits until each answers (and each
// ensemble has formed), and puts a proxy named after the server in front
// of its client port.
func (c *Cluster) Start(ctx context.Context, specs []backends.ServerSpec) error {
	if err := c.place.start(ctx, c, specs); err != nil {
		return err
	}
	c.settlePower()
	return nil
}

// allocIP gives a server its own address in the run's slot, so that
// faults can cut the links between two members or between a member and a
// client instance.
func (c *Cluster) allocIP() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextIP++
	return c.Slot.Server(c.nextIP)
}

// newServer gives a server of a single-port kind its own address and a
// free port there, and registers it.
func (c *Cluster) newServer(sp backends.ServerSpec) (*Server, int, error) {
	ip := c.allocIP()
	s := &Server{Spec: sp, IP: ip}
	if err := c.add(s); err != nil {
		return nil, 0, err
	}
	port, err := c.place.port(ip)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	s.Addr = fmt.Sprintf("%s:%d", ip, port)
	c.mu.Unlock()
	return s, port, nil
}

// add registers a server and creates its data dir, its log path and, in
// hosts mode, its host.
func (c *Cluster) add(s *Server) error {
	if err := c.place.host(s); err != nil {
		return err
	}
	s.Dir = filepath.Join(c.dataDir, s.Spec.Name)
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("data dir for %s: %w", s.Spec.Name, err)
	}
	s.LogPath = filepath.Join(c.LogDir, s.Spec.Name+".log")
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("cluster is closed")
	}
	if _, dup := c.servers[s.Spec.Name]; dup {
		c.mu.Unlock()
		return fmt.Errorf("two servers named %s", s.Spec.Name)
	}
	c.servers[s.Spec.Name] = s
	c.order = append(c.order, s.Spec.Name)
	c.mu.Unlock()
	if c.power {
		return c.mountPower(s) // registered first: Close unmounts it
	}
	return nil
}

// proxy puts a toxiproxy proxy named name in front of addr.
func (c *Cluster) proxy(name, addr string) (*toxiclient.Proxy, error) {
	return c.Toxi.Proxy(name, addr)
}

// Endpoints maps each server name to its real client address.
func (c *Cluster) Endpoints() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.servers))
	for name, s := range c.servers {
		out[name] = s.Addr
	}
	return out
}

// Server returns the named server, or nil.
func (c *Cluster) Server(name string) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[name]
}

// Names lists the servers in start order.
func (c *Cluster) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// launch starts s's process and waits until it answers.
func (c *Cluster) launch(ctx context.Context, s *Server) error {
	if err := c.spawn(s); err != nil {
		return err
	}
	return c.await(ctx, s)
}

// spawn starts s's process without waiting.
func (c *Cluster) spawn(s *Server) error {
	cmd, err := s.command()
	if err != nil {
		return fmt.Errorf("start %s: %w", s.Spec.Name, err)
	}
	if c.faketime[s.Spec.Name] {
		if cmd.Env, err = s.useFaketime(cmd.Env); err != nil {
			return fmt.Errorf("start %s: %w", s.Spec.Name, err)
		}
	}
	c.place.wrap(s.NS, cmd)
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log file for %s: %w", s.Spec.Name, err)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logf
	}
	p, err := StartProcess(s.Spec.Name, c.RunID, cmd)
	logf.Close() // the child has its own copy
	if err != nil {
		return err
	}
	s.setProcess(p)
	return nil
}

// await waits until s answers; on failure the error names the server and
// quotes the end of its log (which stays in the results folder).
func (c *Cluster) await(ctx context.Context, s *Server) error {
	if err := s.ready(ctx, s.Process()); err != nil {
		return fmt.Errorf("%s did not become ready: %w\nlast lines of %s:\n%s", s.Spec.Name, err, s.LogPath, Tail(s.LogPath, 10))
	}
	return nil
}

// awaitAll waits for every member of an ensemble that was spawned.
func (c *Cluster) awaitAll(ctx context.Context, servers []*Server) error {
	for _, s := range servers {
		if err := c.await(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// poll calls try every 50ms until it succeeds, p exits, ctx ends or the
// timeout passes.
func poll(ctx context.Context, p *Process, timeout time.Duration, try func() error) error {
	var last error
	ok, err := wait.Until(ctx, 50*time.Millisecond, timeout, func() (bool, error) {
		if p != nil && !p.Alive() {
			return false, fmt.Errorf("process exited: %v", p.ExitErr())
		}
		last = try()
		return last == nil, nil
	})
	switch {
	case err != nil || ok:
		return err
	}
	return fmt.Errorf("not ready within %s: %v", timeout, last)
}

// ErrMissingBinary wraps a missing server executable.
var ErrMissingBinary = errors.New("server binary not found")

// CheckBinaries verifies that the executables for specs exist, with a
// message saying how to get what is missing.
func CheckBinaries(specs []backends.ServerSpec) error {
	for _, sp := range specs {
		if _, err := binary(sp.Kind); err != nil {
			return fmt.Errorf("%s: %w", sp.Name, err)
		}
	}
	return nil
}

// Versions returns the version of each server kind in specs.
func Versions(specs []backends.ServerSpec) map[string]string {
	out := map[string]string{}
	for _, sp := range specs {
		if k, err := LookupKind(sp.Kind); err == nil && k.Version != nil {
			if _, done := out[sp.Kind]; !done {
				out[sp.Kind] = k.Version()
			}
		}
	}
	return out
}

// firstLine runs a command and returns the first line of its output.
func firstLine(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// Peers lists the other servers of the same kind as name.
func (c *Cluster) Peers(name string) []string {
	s := c.Server(name)
	if s == nil {
		return nil
	}
	var out []string
	for _, n := range c.Names() {
		if o := c.Server(n); n != name && o.Spec.Kind == s.Spec.Kind {
			out = append(out, n)
		}
	}
	return out
}

// ServerEndpoint returns the address of a server for an address-level
// rule, or an error saying why a rule on it would not separate it from its
// peers.
func (c *Cluster) ServerEndpoint(name string) (Endpoint, error) {
	s := c.Server(name)
	if s == nil {
		return Endpoint{}, fmt.Errorf("no server %q", name)
	}
	if err := c.place.separable(s); err != nil {
		return Endpoint{}, err
	}
	return Endpoint{IP: s.IP}, nil
}

// Cut is one address-level rule in force.
type Cut interface {
	Packets() (int64, error)
	Undo() error
}

// Drop cuts the packets from a to b: in the receiving host's namespace in
// hosts mode and on a compose topology, else in the harness's iptables
// chain on loopback.
func (c *Cluster) Drop(a, b Endpoint) (Cut, error) { return c.DropSome(a, b, 1) }

// DropSome drops each packet from a to b with probability p.
func (c *Cluster) DropSome(a, b Endpoint, p float64) (Cut, error) {
	return c.place.drop(a, b, p)
}

// HostCommand makes cmd run on a host of its own named name at ip (hosts
// mode: a worker instance); on loopback it leaves cmd alone.
// In a compose topology it makes cmd a worker container on the
// topology's network and returns the container's name.
func (c *Cluster) HostCommand(name, ip string, cmd *exec.Cmd) (string, error) {
	return c.place.instance(name, ip, cmd)
}

// HarnessIP is where the harness's own listeners (the protected resource)
// are reachable by the workers: the slot's harness address, or the host's
// address on a compose topology's network.
func (c *Cluster) HarnessIP() string { return c.place.harnessIP() }

// InstanceIP is worker instance n's own address.
func (c *Cluster) InstanceIP(n int) string { return c.place.instanceIP(n) }

// InstanceMark is the mark worker instance n's connections carry (SO_MARK),
// or 0 when its address shows on the wire (see Endpoint.Mark).
func (c *Cluster) InstanceMark(n int) int { return c.place.instanceMark(n) }

// InstanceEndpoint is worker instance n as one side of a rule.
func (c *Cluster) InstanceEndpoint(n int) Endpoint {
	return Endpoint{IP: c.place.instanceIP(n), Mark: c.place.instanceMark(n)}
}

// Kill SIGKILLs the named server.
func (c *Cluster) Kill(name string) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("kill: no server %q", name)
	}
	return c.place.kill(s)
}

// Restart starts a killed server again with the same address, data
// directory and settings, and waits until it answers.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("restart: no server %q", name)
	}
	return c.place.restart(ctx, c, s)
}

// Signal sends sig to the named server's process group.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("signal: no server %q", name)
	}
	return c.place.signal(s, sig)
}

// Close kills every server, stops toxiproxy and removes the data dir.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	servers := make([]*Server, 0, len(c.servers))
	for _, s := range c.servers {
		servers = append(servers, s)
	}
	c.mu.Unlock()
	var errs []error
	for _, s := range servers {
		if s.Process() == nil {
			continue
		}
		if err := c.place.release(s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Firewall.Close(); err != nil {
		errs = append(errs, fmt.Errorf("remove iptables chain: %w", err))
	}
	for name, r := range c.relays {
		if err := r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close relay %s: %w", name, err))
		}
	}
	// Toxiproxy's API is on the harness's address, which in hosts mode
	// goes with the placement's namespaces: asked after them, the API
	// call waited for its client's timeout (30 s a case).
	if err := c.Toxi.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := c.place.close(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.unmountPower(servers)...)
	if err := os.RemoveAll(c.dataDir); err != nil {
		errs = append(errs, fmt.Errorf("remove data dir: %w", err))
	}
	c.Slot.Release()
	return errors.Join(errs...)
}

// CleanStale removes the data dirs left by harnesses that were killed
// (SIGKILL cannot be caught, so their teardown never ran). A dir is stale
// when the process id in its name is no longer alive.
func CleanStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "lockbench-data-*"))
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "lockbench-data-%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its harness still runs
		}
		powerfs.Sweep(d) // its power-loss layers died with it
		os.RemoveAll(d)  // best effort: a dir we cannot remove is reported by the next run's test
	}
}

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Binary returns the executable of a server kind ("redis", "etcd", ...),
// or an error saying how to get it.
func Binary(kind string) (string, error) { return binary(kind) }

// Reusable reports whether the cluster can be handed to another case once
// Refresh says it is back at its baseline: servers lockbench started on
// loopback (not hosts of their own, not a targets file, not a compose
// topology, none under libfaketime: a moved clock stays moved).
func (c *Cluster) Reusable() bool {
	return c.place.reusable() && len(c.faketime) == 0
}

// Refresh brings a cluster a case has finished with back to its baseline
// for the next case, or says why it cannot: every server must be running,
// not stopped, and answer its readiness probe within timeout (an ensemble
// formed, a leader); every toxic is removed and every proxy made for the
// case's instances and resource deleted (the server-side ones stay). The
// next case's keys must be fresh: counters and rows of the last one stay.
func (c *Cluster) Refresh(ctx context.Context, timeout time.Duration) error {
	if !c.Reusable() {
		return errors.New("this cluster is not lockbench's on loopback")
	}
	c.mu.Lock()
	servers := make([]*Server, 0, len(c.servers))
	for _, s := range c.servers {
		servers = append(servers, s)
	}
	keep := map[string]bool{}
	for name := range c.relays {
		keep[c.Toxi.prefix+name] = true
	}
	c.mu.Unlock()
	for _, s := range servers {
		p := s.Process()
		if p == nil || !p.Alive() {
			return fmt.Errorf("%s is not running", s.Spec.Name)
		}
		if stopped, err := p.Stopped(); err != nil || stopped {
			return fmt.Errorf("%s is stopped (%v)", s.Spec.Name, err)
		}
		s.mu.Lock()
		if s.Proxy != nil {
			keep[s.Proxy.Name] = true
		}
		s.mu.Unlock()
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range servers {
		if err := s.ready(rctx, s.Process()); err != nil {
			return fmt.Errorf("%s does not answer: %w", s.Spec.Name, err)
		}
	}
	if err := c.Toxi.Client.ResetState(); err != nil {
		return fmt.Errorf("reset toxiproxy: %w", err)
	}
	proxies, err := c.Toxi.Client.Proxies()
	if err != nil {
		return fmt.Errorf("list toxiproxy proxies: %w", err)
	}
	for name, p := range proxies {
		if !keep[name] {
			if err := p.Delete(); err != nil {
				return fmt.Errorf("delete proxy %s: %w", name, err)
			}
		}
	}
	return nil
}

// Probe is how the machine is asked what it can do for a fault (root,
// iptables, network namespaces, tc netem, cgroups, libfaketime): the one
// probe scenario validation consults for every requirement a fault
// declares (faults.Info.Requires). Tests replace it to see what a machine
// without them refuses.
var Probe = struct {
	Firewall, Hosts, Netem, Faketime, Fuse func() error
	Cgroups                                func(controller string) error
	// Kubernetes: this bench can drive servers in Kubernetes.
	Kubernetes func() error
}{FirewallAvailable, HostsAvailable, NetemAvailable, FaketimeAvailable, PowerAvailable, CgroupsAvailable, KubernetesAvailable}
