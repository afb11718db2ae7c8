package faults

// Action is what a fault does to its target, which the deployment the
// case runs on must be able to do: the one word a deployment mode is
// asked about (internal/cluster's Mode.Offers), so that what each mode can
// carry is known from the fault's Action alone and no mode names a fault.
//
// A fault has one Action. Where a fault needs something of the machine
// that performs it (root, iptables, a cgroup controller, libfaketime,
// /dev/fuse), that is its Requires, asked of the machine only where the
// mode performs the action there (a cut on a remote host needs that
// host's iptables, not this machine's).
type Action string

// The actions.
const (
	// ActSignal stops the target's processes and resumes them (SIGSTOP
	// and SIGCONT of its process group, docker pause, an exec in its pod).
	ActSignal Action = "signal"
	// ActKill kills the target's processes; a server is started again at
	// the end of the window, on its data.
	ActKill Action = "kill"
	// ActCut drops packets between the target and others below TCP (TCP
	// and UDP alike), all of them or a share.
	ActCut Action = "cut"
	// ActShape delays (and drops a share of) what the target sends (tc
	// netem).
	ActShape Action = "shape"
	// ActCPUQuota caps the CPU the target's processes get.
	ActCPUQuota Action = "cpu-quota"
	// ActDiskThrottle slows the writes and fsyncs of a server to its data
	// disk.
	ActDiskThrottle Action = "disk-throttle"
	// ActClock steps a server's wall clock.
	ActClock Action = "clock"
	// ActClockRate changes the pace of a server's wall clock.
	ActClockRate Action = "clock-rate"
	// ActPowerLoss kills a server and discards every write it never
	// fsynced.
	ActPowerLoss Action = "power-loss"
	// ActDiskFull makes a server's data dir refuse writes with ENOSPC.
	ActDiskFull Action = "disk-full"
	// ActAdmin changes a server beyond the run's own keys: fills its
	// memory with other data, promotes a standby. Only on servers that
	// exist for lockbench (never a targets file's, which may hold other
	// people's data and serve other clients).
	ActAdmin Action = "admin"
	// ActProxy routes a link through a toxiproxy proxy and sets a toxic
	// on it.
	ActProxy Action = "proxy"
)

// Actions lists every action, in the order tables show them.
var Actions = []Action{ActSignal, ActKill, ActCut, ActShape, ActCPUQuota, ActDiskThrottle, ActClock, ActClockRate, ActPowerLoss, ActDiskFull, ActAdmin, ActProxy}

// verbs say what each action does, as messages put it.
var verbs = map[Action]string{
	ActSignal: "stop and resume", ActKill: "kill and restart", ActCut: "cut packets of", ActShape: "shape the traffic of",
	ActCPUQuota: "cap the CPU of", ActDiskThrottle: "throttle the disk of", ActClock: "step the clock of",
	ActClockRate: "change the clock's pace of", ActPowerLoss: "cut the power of", ActDiskFull: "fill the disk of",
	ActAdmin: "change the data or role of", ActProxy: "proxy",
}

// Verb says what an action does, as messages put it ("the targets mode
// cannot stop and resume servers").
func (a Action) Verb() string {
	if v, ok := verbs[a]; ok {
		return v
	}
	return string(a)
}
