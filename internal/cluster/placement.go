package cluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/slot"
)

// placement is where a cluster's servers and worker instances run, and so
// how lockbench acts on them: a deployment mode at work. The mode is
// chosen once, at validation (ModeOf), and its placement made by NewWith
// from the mode's registration; the Cluster's methods never ask which one
// it is. Each mode is one file:
//
//   - local (loopback.go): servers lockbench starts, each on an address of
//     its own in the run's loopback slot; cuts are rules in the harness's
//     iptables chain.
//   - hosts (onhosts.go): the same servers, each server and each worker
//     instance in a network namespace of its own on a switch namespace;
//     cuts are rules in the receiving host's namespace, netem shapes.
//   - targets (external.go): a targets file's servers, which lockbench
//     only talks to.
//   - ssh (onssh.go): a targets file's servers acted on over SSH on their
//     hosts.
//   - kubernetes (kubernetes.go, onkube.go): a targets file's servers in
//     pods, acted on through the Kubernetes API and Chaos Mesh.
//   - compose (compose.go): a compose topology's containers, paused,
//     killed, restarted and cut through the engine, with the worker
//     instances as containers on the topology's network.
//
// What every placement does is this interface; what only some can do is
// an interface of its own below (launcher, killer, signaller,
// separator, instancer, marker, shaper, keeper, clockJumper,
// clockDrifter), found by type assertion: a mode that lacks one has no
// method for it, and the Cluster says so in one place (lacks). The
// scenario's validation refuses such faults before a run starts, from the
// mode's declaration (Mode.Offers); the Cluster's refusal is a second
// line of defence.
type placement interface {
	// start brings up, or finds, the servers of specs.
	start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error
	// release lets go of a server when the cluster closes.
	release(s *Server) error
	// drop drops each packet from a to b with probability p: every mode
	// cuts its worker instances.
	drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error)
	// harnessIP is where the workers reach the harness's own listeners;
	// instanceIP is worker instance n's own address.
	harnessIP() string
	instanceIP(n int) string
	// close removes what the placement made (namespaces, containers).
	close() error
}

// launcher is a placement that starts servers itself: the server kinds'
// Start reach it through Cluster.newServer and Cluster.launch.
type launcher interface {
	// host readies the host of a server lockbench starts (sets s.NS).
	host(s *Server) error
	// port is a port a single-port server at ip may listen on.
	port(ip string) (int, error)
	// wrap makes the command of a server on host ns run there.
	wrap(ns string, cmd *exec.Cmd)
}

// killer is a placement that kills a server and starts it again.
type killer interface {
	kill(s *Server) error
	restart(ctx context.Context, c *Cluster, s *Server) error
}

// signaller is a placement that signals a server's processes.
type signaller interface {
	signal(s *Server, sig syscall.Signal) error
}

// separator is a placement that can cut a server from others at the
// address level: separable is nil when a rule on s's address separates
// it from its peers, or says why it would not.
type separator interface {
	separable(s *Server) error
}

// instancer is a placement that runs each worker instance on a host of
// its own: instance makes cmd run there, at ip, and returns the name of
// the container it became, if any. Without it, an instance runs as
// started, on this machine.
type instancer interface {
	instance(name, ip string, cmd *exec.Cmd) (string, error)
}

// marker is a placement whose worker instances' connections leave from
// an address that does not name them (a server on another host sees this
// machine's): instanceMark is the mark instance n's connections carry
// (firewall.Endpoint.Mark), or 0 when marks cannot be set here.
type marker interface {
	instanceMark(n int) int
}

// shaper is a placement whose servers and instances are hosts of their
// own, on which netem can shape what one sends.
type shaper interface {
	shape(ip string, to []string, delay, jitter time.Duration, loss float64) (firewall.Cut, error)
}

// keeper is a placement whose servers can be handed to the next case.
type keeper interface {
	reusable()
}

// clockJumper is a placement that moves a server's clock itself (over
// SSH, through the faketime file on its host; in Kubernetes, with Chaos
// Mesh's TimeChaos); clockDrifter one that sets its pace. Without them,
// the Cluster moves the clock of a server it started under libfaketime.
type clockJumper interface {
	jumpClock(name string, d time.Duration) error
}

type clockDrifter interface {
	driftClock(name string, rate float64) error
}

// lacks is the error of an action the placement of the cluster's mode
// cannot perform on a server: validation refuses it first, saying why.
func (c *Cluster) lacks(verb, server string) error {
	return fmt.Errorf("%s %s: the %s mode does not %s its servers", verb, server, c.mode.Name, verb)
}

// own is what the placements of servers lockbench starts share: each
// kind's servers started on the run's slot, killed and restarted as
// local process groups.
type own struct {
	slot *slot.Slot
}

// start starts each kind's servers in the order the specs first name it.
func (o *own) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	var kinds []string
	groups := map[string][]backends.ServerSpec{}
	for _, sp := range specs {
		if _, seen := groups[sp.Kind]; !seen {
			kinds = append(kinds, sp.Kind)
		}
		groups[sp.Kind] = append(groups[sp.Kind], sp)
	}
	for _, k := range kinds {
		kind, err := LookupKind(k)
		if err != nil {
			return fmt.Errorf("start %s: %w", groups[k][0].Name, err)
		}
		if err := kind.Start(ctx, c, groups[k]); err != nil {
			return err
		}
	}
	return nil
}

func (o *own) kill(s *Server) error    { return s.Process().Kill(5 * time.Second) }
func (o *own) release(s *Server) error { return o.kill(s) }
func (o *own) harnessIP() string       { return o.slot.Harness() }
func (o *own) instanceIP(n int) string { return o.slot.Instance(n) }
func (o *own) signal(s *Server, sig syscall.Signal) error {
	return s.Process().Signal(sig)
}

func (o *own) restart(ctx context.Context, c *Cluster, s *Server) error {
	if p := s.Process(); p != nil && p.Alive() {
		return fmt.Errorf("restart %s: still running", s.Spec.Name)
	}
	return c.launch(ctx, s)
}

// found is what the placements of a targets file's servers share: each
// server found at the address the file gives, nothing started; cuts of
// the worker instances are made in the harness's own chain.
type found struct {
	addrs map[string]string // server name -> address, from the targets file
	slot  *slot.Slot
	fw    *firewall.Chain
}

func (f *found) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	return f.register(ctx, c, specs, nil)
}

// register records each server of specs at its address, calls attach on
// it (when set) and checks that it answers on TCP, from the harness's
// address as the workers will.
func (f *found) register(ctx context.Context, c *Cluster, specs []backends.ServerSpec, attach func(*Server) error) error {
	for _, sp := range specs {
		addr, ok := f.addrs[sp.Name]
		if !ok {
			return fmt.Errorf("%s: not in the targets file", sp.Name)
		}
		host, _, _ := strings.Cut(addr, ":")
		s := &Server{Spec: sp, IP: host, Addr: addr}
		c.mu.Lock()
		c.servers[sp.Name] = s
		c.order = append(c.order, sp.Name)
		c.mu.Unlock()
		if attach != nil {
			if err := attach(s); err != nil {
				return err
			}
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("%s at %s (targets file) does not answer: %w", sp.Name, addr, err)
		}
		conn.Close()
	}
	return nil
}

func (f *found) release(*Server) error   { return nil }
func (f *found) harnessIP() string       { return f.slot.Harness() }
func (f *found) instanceIP(n int) string { return f.slot.Instance(n) }
func (f *found) close() error            { return nil }

// drop cuts on the harness's own side: what the workers send from this
// machine.
func (f *found) drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	return f.fw.DropSome(a, b, p)
}
