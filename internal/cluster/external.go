package cluster

import (
	"os"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
)

// The targets mode: a targets file's servers without a control section.
// lockbench only talks to them; its own worker instances, and the client
// links from them, it can fault as anywhere.
func init() {
	RegisterMode(Mode{Name: ModeTargets, Title: "targets",
		Offers: map[faults.Action][]On{
			faults.ActSignal: {OnInstance}, faults.ActKill: {OnInstance}, faults.ActCut: {OnInstance},
			faults.ActCPUQuota: {OnInstance}, faults.ActProxy: {OnClientLink}},
		Why: "lockbench does not run a targets file's servers (no pause, kill, firewall rule, cgroup, clock or peer link of theirs, and nothing written beyond the run's own keys) unless the file gives them a control section; fault the worker instances or their client links instead",
		place: func(c *Cluster, o Options) (placement, error) {
			return &external{found: c.found(o)}, nil
		}})
}

// external is the placement of a targets file's servers (bench run
// -targets): lockbench only talks to them. Start checks that each answers
// on TCP; it has no way to signal, kill, restart or firewall them (no
// killer, signaller or separator: the scenario's validation refuses such
// faults first). The modes with a control plane build on it.
type external struct {
	found
}

// instanceMark: a worker's connections to a server on another host leave
// from this machine's own address, so an instance is known on the wire
// by the mark its connections carry. Setting a socket's mark needs root
// (CAP_NET_ADMIN), as the firewall that reads it does: without it there
// is no mark, and no cut of an instance either (validation asks).
func (e *external) instanceMark(n int) int {
	if os.Geteuid() != 0 {
		return 0
	}
	return firewall.InstanceMark(e.slot.N, n)
}
