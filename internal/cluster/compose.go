package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/machinery/docker"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/netns"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
)

// The compose mode: the topology's containers are paused, killed,
// restarted, cut and shaped through the engine and their namespaces; the
// harness cannot confine them in cgroups of its own, put their data dirs
// on its disk layer, or start them under libfaketime, and their links to
// each other go through no proxy.
func init() {
	RegisterMode(Mode{Name: ModeCompose, Title: "compose",
		Offers: map[faults.Action][]On{
			faults.ActSignal: every, faults.ActKill: every, faults.ActCut: every, faults.ActShape: every,
			faults.ActClock: {OnServer}, faults.ActClockRate: {OnServer}, faults.ActAdmin: {OnServer},
			faults.ActProxy: {OnClientLink}},
		Why: "with -compose the servers and instances are containers of the topology: no cgroup, disk layer or libfaketime of the harness's reaches them, and the links between containers go through no proxy (cut them with isolate, split or one-way)",
		place: func(c *Cluster, o Options) (placement, error) {
			if o.Compose == nil {
				return nil, errors.New("the compose mode needs the compose topology (Options.Compose)")
			}
			cleanStaleContainers(c.Slot.N)
			return &onCompose{found: c.found(o), cfg: o.Compose, h: netns.Containers(), runID: c.RunID}, nil
		}})
}

// Compose names a running compose topology (make compose-bench brings one
// up from compose/).
type Compose struct {
	File, Project string
	// WorkerImage is the image of the worker instances' containers.
	WorkerImage string
}

// onCompose is the placement of a compose topology's servers: found, like
// a targets file's, at the addresses the file gives, but as containers
// lockbench may pause, kill, restart and cut through the engine (each
// container's network namespace is a host of Hosts); worker instances run
// as containers of the worker image on the topology's network. The
// topology outlives the run: Close leaves every server running.
type onCompose struct {
	found
	cfg   *Compose
	h     *netns.Hosts
	runID string
	// network and gateway are the topology's docker network and the
	// host's address on it (the harness's, there), learnt from the first
	// server's container.
	network, gateway string
}

func (o *onCompose) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	if err := o.register(ctx, c, specs, o.attach); err != nil {
		return err
	}
	return awaitLeader(ctx, c, specs)
}

// awaitLeader waits for a leader where the servers have one: servers just
// brought up (a topology, or a control plane's repair) may still be
// electing.
func awaitLeader(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	for _, sp := range specs {
		if HasLeader(sp.Kind) {
			return poll(ctx, nil, 60*time.Second, func() error {
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				_, err := c.Leader(lctx)
				return err
			})
		}
	}
	return nil
}

func (o *onCompose) kill(s *Server) error { return s.Process().Kill(5 * time.Second) }
func (o *onCompose) signal(s *Server, sig syscall.Signal) error {
	return s.Process().Signal(sig)
}
func (o *onCompose) separable(*Server) error { return nil }
func (o *onCompose) drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	return o.h.DropSome(a, b, p)
}

// harnessIP is the host's address on the topology's network.
func (o *onCompose) harnessIP() string {
	if o.gateway == "" {
		return o.found.harnessIP()
	}
	return o.gateway
}

// instanceIP: 10.250.0.1 -> 10.250.<1+slot>.n, the topology's /16, apart
// from its servers and from other runs' instances.
func (o *onCompose) instanceIP(n int) string {
	if o.gateway == "" {
		return o.found.instanceIP(n)
	}
	p := strings.Split(o.gateway, ".")
	return fmt.Sprintf("%s.%s.%d.%d", p[0], p[1], 1+o.slot.N%200, n)
}

// release leaves the server running and unpaused for the next case, and
// only stops watching it.
func (o *onCompose) release(s *Server) error {
	p := s.Process()
	if p == nil {
		return nil
	}
	docker.Run("unpause", p.Container())
	_, err := docker.Run("start", p.Container())
	p.Detach()
	return err
}

// close removes this run's worker containers, should any remain.
func (o *onCompose) close() error {
	cleanStaleContainers(o.slot.N)
	if err := o.h.Close(); err != nil {
		return fmt.Errorf("forget the topology's hosts: %w", err)
	}
	return nil
}

// composeCmd runs docker-compose on the topology.
func (o *onCompose) composeCmd(args ...string) (string, error) {
	out, err := exec.Command("docker-compose", append([]string{"-f", o.cfg.File, "-p", o.cfg.Project}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker-compose %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// attach finds the container of server s (the compose service of its
// name), learns the topology's network from it, and watches it with a
// docker wait process, which exits when the container stops.
func (o *onCompose) attach(s *Server) error {
	id, err := o.composeCmd("ps", "-q", s.Spec.Name)
	if err != nil || id == "" {
		return fmt.Errorf("%s: no container of that service in %s (is the topology up? make compose-bench brings it up): %v", s.Spec.Name, o.cfg.File, err)
	}
	nets, err := docker.Run("inspect", "-f", `{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.Gateway}} {{$v.IPAddress}}{{"\n"}}{{end}}`, id)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(nets, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == s.IP {
			o.network, o.gateway = f[0], f[1]
		}
	}
	if o.network == "" {
		return fmt.Errorf("%s: its container has no address %s (the targets file and the compose file disagree)", s.Spec.Name, s.IP)
	}
	o.h.Register(s.IP, id)
	return o.watch(s, id)
}

func (o *onCompose) watch(s *Server, id string) error {
	p, err := procgroup.StartContainerProcess(s.Spec.Name, o.runID, id, exec.Command("docker", "wait", id))
	if err != nil {
		return err
	}
	s.setProcess(p)
	return nil
}

// restart starts a killed server's container again (same container: its
// data and address) and waits until it answers.
func (o *onCompose) restart(ctx context.Context, _ *Cluster, s *Server) error {
	if p := s.Process(); p != nil && p.Alive() {
		return fmt.Errorf("restart %s: still running", s.Spec.Name)
	}
	id := s.Process().Container()
	if _, err := docker.Run("start", id); err != nil {
		return err
	}
	if err := o.watch(s, id); err != nil {
		return err
	}
	return poll(ctx, s.Process(), 60*time.Second, func() error {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// instance turns cmd (a bench worker) into a container of the worker
// image on the topology's network at ip, attached to cmd's stdin and
// stdout, and returns its name.
func (o *onCompose) instance(name, ip string, cmd *exec.Cmd) (string, error) {
	if o.network == "" {
		return "", errors.New("the topology's network is unknown before its servers were found")
	}
	cname := fmt.Sprintf("lb%d-%s", o.slot.N, name)
	docker.Run("rm", "-f", cname) // a leftover of this slot
	args := []string{"run", "-i", "--rm", "--name", cname, "--network", o.network, "--ip", ip,
		"--label", fmt.Sprintf("lockbench.slot=%d", o.slot.N), "-e", procgroup.EnvRunID + "=" + o.runID, o.cfg.WorkerImage}
	args = append(args, cmd.Args[1:]...)
	docker, err := exec.LookPath("docker")
	if err != nil {
		return "", err
	}
	cmd.Path, cmd.Args = docker, append([]string{"docker"}, args...)
	o.h.Register(ip, cname)
	return cname, nil
}

// cleanStaleContainers removes the worker containers a killed run of slot
// n left.
func cleanStaleContainers(n int) {
	ids, err := docker.Run("ps", "-aq", "--filter", fmt.Sprintf("label=lockbench.slot=%d", n))
	if err != nil || ids == "" {
		return
	}
	docker.Run(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
}
