package cluster

import (
	"fmt"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/control"
)

// ModeKubernetes is the mode of a targets file whose servers are
// controlled through the Kubernetes API.
const ModeKubernetes = "kubernetes"

// The Kubernetes mode: a targets file's servers in pods, acted on
// through the Kubernetes API and Chaos Mesh; the worker instances run where
// bench runs, as with any targets file.
func init() {
	RegisterMode(Mode{Name: ModeKubernetes, Title: "targets + Kubernetes", Remote: []On{OnServer}, Faketime: true, NoEmulatedClock: true, WholeCuts: true, PodCuts: true,
		Offers: map[faults.Action][]On{
			faults.ActSignal: every, faults.ActKill: every, faults.ActCut: every, faults.ActCPUQuota: {OnInstance},
			faults.ActClock: {OnServer}, faults.ActProxy: {OnClientLink}},
		Why: "in Kubernetes lockbench stops and resumes a server's processes from its pod's agent container, deletes its pod, cuts it with a Chaos Mesh NetworkChaos and moves its clock with a TimeChaos; it has no CPU quota, disk, power or clock pace of its (Chaos Mesh's StressChaos, IOChaos and TimeChaos cannot be seen doing those the way lockbench observes them), writes nothing beyond the run's keys, and a server's peer links go through no proxy",
		How: map[faults.Action]string{
			faults.ActSignal:       "servers: SIGSTOP/SIGCONT of the server's process group from the pod's agent container (pods/exec; Chaos Mesh has no pause), seen in the pod's /proc; instances: as with any targets file",
			faults.ActKill:         "servers: the Kubernetes API's pod delete with grace period 0 (SIGKILL to its containers; Chaos Mesh's PodChaos pod-kill does the same), seen when the pod is gone; its StatefulSet makes it again at once, not at the window's end, and the heal waits for it ready; instances: as with any targets file",
			faults.ActCut:          "between servers: NetworkChaos action partition (or loss for a share), direction to, from one pod to the other, seen as Chaos Mesh records it injected (no packet count); from or to an instance: iptables by the instance's mark where bench runs",
			faults.ActShape:        "not carried: NetworkChaos action delay would, but the netem fault is seen by the packets through its queue, which Chaos Mesh does not give",
			faults.ActCPUQuota:     "instances only (a cgroup where bench runs); servers: not carried: StressChaos adds load, it sets no quota",
			faults.ActDiskThrottle: "not carried: IOChaos action latency would slow the data volume's writes, but disk-stall is seen by the writes through the throttle, which IOChaos does not count",
			faults.ActClock:        "PostgreSQL: TimeChaos timeOffset on CLOCK_REALTIME of the server container (of the total offset; deleted, and the clock set right, when the run ends), seen by asking the server its time; Redis: not carried (emulated elsewhere through its data)",
			faults.ActClockRate:    "not carried: TimeChaos offsets a clock, it does not change its pace",
			faults.ActPowerLoss:    "not carried: no Chaos Mesh kind discards what a server never fsynced (IOChaos fails or delays I/O, it does not lose it)",
			faults.ActDiskFull:     "not carried: IOChaos action fault with errno 28 (ENOSPC) would, but disk-full is seen by the writes it refused, which IOChaos does not count",
			faults.ActAdmin:        "never on a targets file's servers",
			faults.ActProxy:        "client links: toxiproxy where bench runs, as with any targets file; server links: not carried",
		},
		place: func(c *Cluster, o Options) (placement, error) {
			if err := KubernetesAvailable(); err != nil {
				return nil, err
			}
			return kubePlane(external{found: c.found(o)}, o.Control, c.RunID)
		}})
}

// kubePlane makes the Kubernetes placement; a bench built with -tags
// kubernetes sets it (onkube.go).
var kubePlane func(ext external, ctl map[string]*control.Section, runID string) (placement, error)

// KubernetesAvailable says whether this bench can drive servers in
// Kubernetes (it was built with -tags kubernetes).
func KubernetesAvailable() error {
	if kubePlane == nil {
		return fmt.Errorf("this bench was built without Kubernetes support: build it with `make build-kube` (go build -tags kubernetes)")
	}
	return nil
}
