package cluster

import (
	"context"
	"fmt"
	"github.com/lockbench/lockbench/faults"
	"os/exec"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// The local mode: every action on lockbench's own servers and instances,
// but netem (it needs a host per server), and cuts between servers only
// of kinds that send from their own address.
func init() {
	RegisterMode(Mode{Name: ModeLocal, Title: "local", Faketime: true, SourceCuts: true,
		Offers: map[faults.Action][]On{
			faults.ActSignal: every, faults.ActKill: every, faults.ActCut: every, faults.ActCPUQuota: every,
			faults.ActDiskThrottle: {OnServer}, faults.ActClock: {OnServer}, faults.ActClockRate: {OnServer},
			faults.ActPowerLoss: {OnServer}, faults.ActDiskFull: {OnServer}, faults.ActAdmin: {OnServer},
			faults.ActProxy: {OnClientLink, OnServerLink}},
		Why: "netem needs every server and instance on a host of its own (network: hosts, or bench run -network hosts; root) and a kernel with tc netem"})
}

// loopback is the placement of servers lockbench starts itself, each on an
// address of its own in the run's loopback slot, with cuts as rules in the
// harness's iptables chain. Worker instances run as they are started.
type loopback struct {
	slot *Slot
	fw   *Firewall
}

// start starts each kind's servers in the order the specs first name it.
func (l *loopback) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
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

func (l *loopback) host(*Server) error          { return nil }
func (l *loopback) port(ip string) (int, error) { return FreePort(ip) }
func (l *loopback) wrap(string, *exec.Cmd)      {}
func (l *loopback) kill(s *Server) error        { return s.Process().Kill(5 * time.Second) }
func (l *loopback) release(s *Server) error     { return l.kill(s) }
func (l *loopback) harnessIP() string           { return l.slot.Harness() }
func (l *loopback) instanceIP(n int) string     { return l.slot.Instance(n) }
func (l *loopback) close() error                { return nil }
func (l *loopback) reusable() bool              { return true }
func (l *loopback) signal(s *Server, sig syscall.Signal) error {
	return s.Process().Signal(sig)
}

func (l *loopback) restart(ctx context.Context, c *Cluster, s *Server) error {
	if p := s.Process(); p != nil && p.Alive() {
		return fmt.Errorf("restart %s: still running", s.Spec.Name)
	}
	return c.launch(ctx, s)
}

// separable: on one loopback interface, a rule on a server's address
// separates it only if it sends from that address too.
func (l *loopback) separable(s *Server) error {
	if !BindsSource(s.Spec.Kind) {
		return fmt.Errorf("%s servers do not use their own address as source; an address-level partition would not separate them", s.Spec.Kind)
	}
	return nil
}

func (l *loopback) drop(a, b Endpoint, p float64) (Cut, error) { return l.fw.DropSome(a, b, p) }

func (l *loopback) instance(string, string, *exec.Cmd) (string, error) { return "", nil }

// instanceMark: an instance's connections leave from its own address.
func (l *loopback) instanceMark(int) int { return 0 }
