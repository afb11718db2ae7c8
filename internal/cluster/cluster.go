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
	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/netns"
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/machinery/slot"
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
	ready   func(ctx context.Context, p *procgroup.Process) error

	power *powerfs.FS // its data dir's power-loss layer, if any

	mu   sync.Mutex
	proc *procgroup.Process
}

// Process returns the server's current process.
func (s *Server) Process() *procgroup.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// setProcess makes p the server's current process (at a start or restart).
func (s *Server) setProcess(p *procgroup.Process) {
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// Cluster is the set of servers of one case, on the addresses of the run's
// own slot, with toxiproxy proxies on the links that faults act on, placed
// by its deployment mode (Mode, placement). Close tears everything down
// and is safe to call more than once.
type Cluster struct {
	RunID  string
	LogDir string
	Slot   *slot.Slot
	Toxi   *Toxi
	// firewall is the harness's own iptables chain (created on first
	// use): the cuts of the local mode, and of worker instances with a
	// targets file.
	firewall *firewall.Chain
	dataDir  string
	// mode is the cluster's deployment mode, and place its placement: where
	// the servers and instances run.
	mode  Mode
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
	// Mode is the deployment mode's name (ModeOf chose it at validation;
	// "" is the local mode).
	Mode string
	// Proxied names the server-side links that faults of the case act on
	// (etcd-1-peer, redis-1-repl): only those go through toxiproxy.
	Proxied []string
	// External names the servers of a targets file (the modes targets,
	// ssh, kubernetes and compose): lockbench finds them at these
	// addresses and starts none.
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
	// Control, in the ssh and kubernetes modes, gives some of the targets
	// file's servers a control plane: the server faults then act on them
	// (see control.Section).
	Control map[string]*control.Section
	// Compose, in the compose mode, is the docker compose topology the
	// targets file's servers are services of: lockbench may then pause,
	// kill, restart and cut them through the engine, and runs worker
	// instances as containers on its network.
	Compose *Compose
}

// New takes an address slot for the cluster and starts its toxiproxy
// server, on loopback. Server logs go to logDir; data lives in a private
// temp dir removed by Close.
func New(runID, logDir string, proxied ...string) (*Cluster, error) {
	return NewWith(runID, logDir, Options{Proxied: proxied})
}

// NewWith is New with options: the cluster's placement is its mode's.
func NewWith(runID, logDir string, o Options) (*Cluster, error) {
	if o.Mode == "" {
		o.Mode = ModeLocal
	}
	m, err := LookupMode(o.Mode)
	if err != nil {
		return nil, err
	}
	if own := o.Mode == ModeLocal || o.Mode == ModeHosts; own != (o.External == nil) {
		return nil, fmt.Errorf("the %s mode and the servers given (Options.External: %d) do not agree: the local and hosts modes start their servers, the others find a targets file's", o.Mode, len(o.External))
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	CleanStale()
	cleanFreeSlots()
	cgroup.CleanStale()
	if err := firewall.CleanStale(); err != nil {
		return nil, fmt.Errorf("remove iptables chains of dead runs: %w", err)
	}
	acquire := slot.Acquire
	if o.Mode == ModeHosts {
		acquire = slot.AcquireHosts
	}
	sl, err := acquire()
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", fmt.Sprintf("lockbench-data-%d-", os.Getpid()))
	if err != nil {
		sl.Release()
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// Servers that refuse to run as root (PostgreSQL) must reach their
	// data dir below this one.
	if err := os.Chmod(dataDir, 0o755); err != nil {
		os.RemoveAll(dataDir)
		sl.Release()
		return nil, fmt.Errorf("data dir: %w", err)
	}
	c := &Cluster{RunID: runID, LogDir: logDir, Slot: sl, firewall: firewall.New(), dataDir: dataDir, mode: m,
		servers: map[string]*Server{}, proxied: map[string]bool{}, relays: map[string]*links.Relay{}}
	// The placement first: in hosts mode, the harness's address (where
	// toxiproxy listens) is on the link to the run's switch it makes.
	if c.place, err = m.place(c, o); err != nil {
		os.RemoveAll(dataDir)
		sl.Release()
		return nil, err
	}
	if o.ExternalToxi != nil {
		c.Toxi, err = ConnectToxi(*o.ExternalToxi, fmt.Sprintf("lockbench-%s-", runID))
	} else {
		c.Toxi, err = StartToxi(sl.Harness())
	}
	if err != nil {
		return nil, errors.Join(err, c.place.close(), os.RemoveAll(dataDir), release(sl))
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

// release gives a slot back, as a step of an undo.
func release(s *slot.Slot) error {
	s.Release()
	return nil
}

// found is the base of the placements of a targets file's servers.
func (c *Cluster) found(o Options) found {
	return found{addrs: o.External, slot: c.Slot, fw: c.firewall}
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
	if err := c.firewall.Close(); err != nil {
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
// (SIGKILL cannot be caught, so their teardown never ran), aborting the
// FUSE connections of their power-loss layers first (a server stuck on
// one could never exit). A dir is stale when the process id in its name
// is no longer alive. What it did is printed on stderr and returned.
func CleanStale() []string {
	did := cleanStale()
	for _, d := range did {
		fmt.Fprintf(os.Stderr, "repair: %s\n", d)
	}
	return did
}

func cleanStale() []string {
	var did []string
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
		swept, err := powerfs.Sweep(d) // its power-loss layers died with it
		for _, s := range swept {
			did = append(did, fmt.Sprintf("%s (left by run %d, which is gone)", s, pid))
		}
		if err != nil {
			did = append(did, fmt.Sprintf("could not repair every layer of run %d: %v", pid, err))
		}
		if os.RemoveAll(d) == nil { // best effort: a dir we cannot remove is reported by the next run's test
			did = append(did, fmt.Sprintf("removed data dir %s (left by run %d, which is gone)", d, pid))
		}
	}
	return did
}

// cleanFreeSlots removes the namespaces and bridges a killed hosts-mode
// run left on a slot nobody holds now, holding the slot meanwhile so that
// no run takes it half cleaned. A run cleans its own slot when it makes
// its hosts (netns.New); this is for a slot the next runs do not take
// (a lower one was free again), which nothing else would repair.
func cleanFreeSlots() {
	if netns.Available() != nil {
		return
	}
	for _, n := range netns.StaleSlots() {
		if s, ok := slot.Hold(n); ok {
			netns.CleanStale(n) // best effort: what is left is reported by the next run's test
			s.Release()
		}
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

// Reusable reports whether the cluster can be handed to another case once
// Refresh says it is back at its baseline: servers lockbench started on
// loopback (not hosts of their own, not a targets file, not a compose
// topology, none under libfaketime: a moved clock stays moved).
func (c *Cluster) Reusable() bool {
	_, ok := c.place.(keeper)
	return ok && len(c.faketime) == 0
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
