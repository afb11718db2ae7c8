package cluster

import (
	"fmt"
	"os/exec"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
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
		Why: "netem needs every server and instance on a host of its own (network: hosts, or bench run -network hosts; root) and a kernel with tc netem",
		place: func(c *Cluster, _ Options) (placement, error) {
			return &loopback{own: own{slot: c.Slot}, fw: c.firewall}, nil
		}})
}

// loopback is the placement of servers lockbench starts itself, each on an
// address of its own in the run's loopback slot, with cuts as rules in the
// harness's iptables chain. Worker instances run as they are started.
type loopback struct {
	own
	fw *firewall.Chain
}

func (l *loopback) host(*Server) error          { return nil }
func (l *loopback) port(ip string) (int, error) { return FreePort(ip) }
func (l *loopback) wrap(string, *exec.Cmd)      {}
func (l *loopback) close() error                { return nil }

// reusable: its servers, on loopback, can serve the next case.
func (l *loopback) reusable() {}

// separable: on one loopback interface, a rule on a server's address
// separates it only if it sends from that address too.
func (l *loopback) separable(s *Server) error {
	if !BindsSource(s.Spec.Kind) {
		return fmt.Errorf("%s servers do not use their own address as source; an address-level partition would not separate them", s.Spec.Kind)
	}
	return nil
}

func (l *loopback) drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	return l.fw.DropSome(a, b, p)
}
