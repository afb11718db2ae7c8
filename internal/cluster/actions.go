package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/faketime"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/netns"
)

// What the faults act on, through the placement of the cluster's mode:
// the abilities a mode lacks are refused here, by lacks.

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
func (c *Cluster) ServerEndpoint(name string) (firewall.Endpoint, error) {
	s := c.Server(name)
	if s == nil {
		return firewall.Endpoint{}, fmt.Errorf("no server %q", name)
	}
	sep, ok := c.place.(separator)
	if !ok {
		return firewall.Endpoint{}, c.lacks("cut", name)
	}
	if err := sep.separable(s); err != nil {
		return firewall.Endpoint{}, err
	}
	return firewall.Endpoint{IP: s.IP}, nil
}

// Drop cuts the packets from a to b: in the receiving host's namespace in
// hosts mode and on a compose topology, else in the harness's iptables
// chain on loopback.
func (c *Cluster) Drop(a, b firewall.Endpoint) (firewall.Cut, error) { return c.DropSome(a, b, 1) }

// DropSome drops each packet from a to b with probability p.
func (c *Cluster) DropSome(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	return c.place.drop(a, b, p)
}

// HostCommand makes cmd run on a host of its own named name at ip (hosts
// mode: a worker instance); on loopback it leaves cmd alone.
// In a compose topology it makes cmd a worker container on the
// topology's network and returns the container's name.
func (c *Cluster) HostCommand(name, ip string, cmd *exec.Cmd) (string, error) {
	if in, ok := c.place.(instancer); ok {
		return in.instance(name, ip, cmd)
	}
	return "", nil
}

// HarnessIP is where the harness's own listeners (the protected resource)
// are reachable by the workers: the slot's harness address, or the host's
// address on a compose topology's network.
func (c *Cluster) HarnessIP() string { return c.place.harnessIP() }

// InstanceIP is worker instance n's own address.
func (c *Cluster) InstanceIP(n int) string { return c.place.instanceIP(n) }

// InstanceMark is the mark worker instance n's connections carry (SO_MARK),
// or 0 when its address shows on the wire (see firewall.Endpoint.Mark).
func (c *Cluster) InstanceMark(n int) int {
	if m, ok := c.place.(marker); ok {
		return m.instanceMark(n)
	}
	return 0
}

// InstanceEndpoint is worker instance n as one side of a rule.
func (c *Cluster) InstanceEndpoint(n int) firewall.Endpoint {
	return firewall.Endpoint{IP: c.place.instanceIP(n), Mark: c.InstanceMark(n)}
}

// Shape puts netem (delay with jitter, a loss percentage) on what the host
// at ip sends to the hosts at to (to everyone when to is empty): in the
// modes whose servers and instances are hosts of their own.
func (c *Cluster) Shape(ip string, to []string, delay, jitter time.Duration, loss float64) (firewall.Cut, error) {
	sh, ok := c.place.(shaper)
	if !ok {
		return nil, fmt.Errorf("netem on %s: the %s mode puts no server or instance on a host of its own (network: hosts)", ip, c.mode.Name)
	}
	return sh.shape(ip, to, delay, jitter, loss)
}

// Kill SIGKILLs the named server.
func (c *Cluster) Kill(name string) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("kill: no server %q", name)
	}
	k, ok := c.place.(killer)
	if !ok {
		return c.lacks("kill", name)
	}
	return k.kill(s)
}

// Restart starts a killed server again with the same address, data
// directory and settings, and waits until it answers.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("restart: no server %q", name)
	}
	k, ok := c.place.(killer)
	if !ok {
		return c.lacks("restart", name)
	}
	return k.restart(ctx, c, s)
}

// Signal sends sig to the named server's process group.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("signal: no server %q", name)
	}
	sg, ok := c.place.(signaller)
	if !ok {
		return c.lacks("signal", name)
	}
	return sg.signal(s, sig)
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
}{firewall.Available, netns.Available, netns.NetemAvailable, faketime.Available, PowerAvailable, cgroup.Available, KubernetesAvailable}
