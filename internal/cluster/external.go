package cluster

import (
	"context"
	"fmt"
	"github.com/lockbench/lockbench/faults"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// The targets mode: a targets file's servers without a control section.
// lockbench only talks to them; its own worker instances, and the client
// links from them, it can fault as anywhere.
func init() {
	RegisterMode(Mode{Name: ModeTargets, Title: "targets",
		Offers: map[faults.Action][]On{
			faults.ActSignal: {OnInstance}, faults.ActKill: {OnInstance}, faults.ActCut: {OnInstance},
			faults.ActCPUQuota: {OnInstance}, faults.ActProxy: {OnClientLink}},
		Why: "lockbench does not run a targets file's servers (no pause, kill, firewall rule, cgroup, clock or peer link of theirs, and nothing written beyond the run's own keys) unless the file gives them a control section; fault the worker instances or their client links instead"})
}

// external is the placement of a targets file's servers (bench run
// -targets): lockbench only talks to them. Start checks that each answers
// on TCP; nothing ever signals, kills, restarts or firewalls them (the
// scenario's validation refuses such faults first).
type external struct {
	addrs map[string]string // server name -> address, from the targets file
	slot  *Slot
	fw    *Firewall
}

func (e *external) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	return e.register(ctx, c, specs, nil)
}

// register records each server of specs at its address, calls attach on
// it (when set) and checks that it answers on TCP, from the harness's
// address as the workers will.
func (e *external) register(ctx context.Context, c *Cluster, specs []backends.ServerSpec, attach func(*Server) error) error {
	for _, sp := range specs {
		addr, ok := e.addrs[sp.Name]
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

// refuse refuses to act on a process lockbench does not run.
func (e *external) refuse(verb string, s *Server) error {
	return fmt.Errorf("%s %s: lockbench does not run the servers of a targets file", verb, s.Spec.Name)
}

func (e *external) host(s *Server) error { return e.refuse("start", s) }
func (e *external) port(string) (int, error) {
	return 0, fmt.Errorf("lockbench does not start the servers of a targets file")
}
func (e *external) wrap(string, *exec.Cmd)    {}
func (e *external) kill(s *Server) error      { return e.refuse("kill", s) }
func (e *external) release(*Server) error     { return nil }
func (e *external) harnessIP() string         { return e.slot.Harness() }
func (e *external) instanceIP(n int) string   { return e.slot.Instance(n) }
func (e *external) close() error              { return nil }
func (e *external) reusable() bool            { return false }
func (e *external) separable(s *Server) error { return e.refuse("cut", s) }
func (e *external) signal(s *Server, _ syscall.Signal) error {
	return e.refuse("signal", s)
}

func (e *external) restart(_ context.Context, _ *Cluster, s *Server) error {
	return e.refuse("restart", s)
}

// drop cuts on the harness's own side: what the workers send from this
// machine.
func (e *external) drop(a, b Endpoint, p float64) (Cut, error) { return e.fw.DropSome(a, b, p) }

func (e *external) instance(string, string, *exec.Cmd) (string, error) { return "", nil }

// instanceMark: a worker's connections to a server on another host leave
// from this machine's own address, so an instance is known on the wire
// by the mark its connections carry. Setting a socket's mark needs root
// (CAP_NET_ADMIN), as the firewall that reads it does: without it there
// is no mark, and no cut of an instance either (validation asks).
func (e *external) instanceMark(n int) int {
	if os.Geteuid() != 0 {
		return 0
	}
	return instanceMark(e.slot.N, n)
}
