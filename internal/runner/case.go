package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/wait"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/resource"
	"github.com/lockbench/lockbench/internal/scenario"
)

// caseRun is one case in progress.
type caseRun struct {
	r   *run
	c   *scenario.Case
	idx int
	cl  *cluster.Cluster
	// acts is the cluster as the faults act on it: cl (liveCluster), or
	// a fake in tests.
	acts     faultCluster
	res      *resource.Server
	resProxy string
	plan     linkPlan
	workers  map[history.Instance]*workerProc
	start    int64 // case start, since run base

	// reusedFrom names the case whose cluster this one runs on ("": its
	// own); dirty says a fault left it off its baseline.
	reusedFrom string
	dirty      atomic.Bool
	liveMu     sync.Mutex
	lastHeal   int64 // when the last fault healed (since run base)
	// served is, for each key some client asked for, when it was last
	// acquired (0: never), as events arrive: the lock's availability is
	// per key (MODEL §11), so one lane's key served says nothing of
	// another's.
	served  map[string]int64
	waiting map[string]bool   // clients with an acquire in flight, as events arrive
	storing map[string]string // clients inside a store critical section: client -> key
	// storeSince is when each storing client's store began (as events
	// arrive, up to a flush of the worker's emitter late).
	storeSince map[string]int64
	// watchRounds counts watchRecovery's looks at the keys (a test knows
	// from it that the watch looked, not only that time passed).
	watchRounds atomic.Int64
	stats       history.HarnessStats
	// killedBy is, for each server or instance a fault of the case
	// killed, that fault's name (faults.KillRecord): a heal that finds
	// the process gone asks it (checker/MODEL.md §10).
	killMu   sync.Mutex
	killedBy map[string]killRec
	// gates are the arms of faults aimed at a job's phase (gates.go),
	// under liveMu.
	gates gateState
}

// killRec is a fault that killed a process, and when.
type killRec struct {
	fault string
	at    time.Time
}

// noteKill records that fault kills target's process now.
func (cr *caseRun) noteKill(target faults.Target, fault string) {
	cr.killMu.Lock()
	defer cr.killMu.Unlock()
	if cr.killedBy == nil {
		cr.killedBy = map[string]killRec{}
	}
	cr.killedBy[target.String()] = killRec{fault: fault, at: time.Now()}
}

func (r *run) runCase(ctx context.Context, c *scenario.Case, idx int) (err error) {
	logDir := filepath.Join(r.dir, layout.LogsDir, c.Name)
	plan := planLinks(c)
	began := time.Now()
	co := r.clusterOptions(c, plan)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	key := clusterKey(c, co)
	cl, from := r.takeKept(ctx, key)
	if cl == nil {
		if cl, err = cluster.NewWith(r.id, logDir, co); err != nil {
			return err
		}
	}
	cr := &caseRun{r: r, c: c, idx: idx, cl: cl, acts: liveCluster{cl}, plan: plan, workers: map[history.Instance]*workerProc{}, waiting: map[string]bool{}, storing: map[string]string{}, storeSince: map[string]int64{}, served: map[string]int64{}, reusedFrom: from,
		gates: gateState{wait: map[string]chan phaseHit{}, held: map[string]phaseHit{}}}
	defer func() {
		// Teardown runs on success, error, interrupt and panic alike.
		cr.killWorkers()
		if cr.res != nil {
			if rerr := cr.res.Close(); rerr != nil && err == nil {
				err = fmt.Errorf("close resource: %w", rerr)
			}
		}
		if err == nil && ctx.Err() == nil && cr.keepable() {
			origin := from
			if origin == "" {
				origin = c.Name
			}
			r.kept = &keptCluster{key: key, cl: cl, origin: origin}
			return
		}
		if cerr := cl.Close(); cerr != nil {
			r.teardownErrs = append(r.teardownErrs, fmt.Errorf("case %s: tear down cluster: %w", c.Name, cerr))
			if err == nil {
				err = fmt.Errorf("tear down cluster: %w", cerr)
			}
		}
	}()
	if from == "" {
		if err := cl.Start(ctx, c.Servers()); err != nil {
			return err
		}
	}
	startup := time.Since(began)
	cr.res, err = resource.Listen(cl.HarnessIP(), resource.Check(c.Workload.FencingCheck), func(e *history.Event) { r.m.emit(*e) })
	if err != nil {
		return err
	}
	for i := history.Instance(1); i <= history.Instance(c.Workload.Instances); i++ {
		routes, err := cr.routes(i, cr.res.Addr())
		if err != nil {
			return err
		}
		if err := cr.startWorker(i, routes, logDir); err != nil {
			return err
		}
	}
	sink, err := cr.prepareSink(ctx)
	if err != nil {
		return err
	}
	if sink != nil {
		defer sink.close(ctx) // on an error; a second close does nothing
	}
	if err := cr.awaitReady(ctx, logDir); err != nil {
		return err
	}
	info := layout.RunCase{Name: c.Name, Backend: c.BackendName, Slot: cl.Slot.N, Proxied: plan.names(c), StartupS: startup.Seconds(),
		Servers: serverKinds(c.Servers()), Reused: from, PlanSeeds: cr.planSeeds()}
	for _, w := range cr.sortedWorkers() {
		if ct := w.proc.Container(); ct != "" {
			info.Containers = append(info.Containers, ct)
		}
	}
	r.addCase(info)
	if from != "" {
		fmt.Fprintf(r.log, "  cluster of %s reused, back at its baseline in %s; proxied links: %v\n", from, startup.Round(time.Millisecond), plan.names(c))
	} else {
		fmt.Fprintf(r.log, "  cluster up in %s (slot %d); proxied links: %v\n", startup.Round(time.Millisecond), cl.Slot.N, plan.names(c))
	}

	meta, err := json.Marshal(c.Meta())
	if err != nil {
		return fmt.Errorf("encode case meta: %w", err)
	}
	r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseStart, Meta: meta})
	cr.start = monoclock.Since(r.base)
	if sink != nil {
		if err := sink.start(ctx); err != nil {
			return err
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	for _, w := range cr.sortedWorkers() {
		if err := w.send("start"); err != nil {
			return fmt.Errorf("start %s: %w", w.name, err)
		}
	}

	r.acquired.Store(0)
	r.fault.Store("")
	stopProgress := r.progress(c, idx)
	defer stopProgress()
	faultCtx, stopFaults := context.WithCancel(ctx)
	var fwg sync.WaitGroup
	rng := r.rng(cr.idx)
	for k, f := range c.Faults {
		fwg.Add(1)
		choice := rng.Uint64()
		go func() {
			defer fwg.Done()
			cr.runFault(faultCtx, f, k, choice)
		}()
	}
	select {
	case <-time.After(c.Workload.Duration.D()):
	case <-ctx.Done():
	}
	// Heal every fault before stopping the clients, so that a paused
	// instance can hear its stop and release what it holds.
	stopFaults()
	fwg.Wait()
	if sink == nil {
		cr.watchRecovery(ctx)
	} else {
		sink.graceAfterHeal(ctx) // a job workload's question is its jobs, not the lock's recovery (MODEL §20)
	}
	r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseStop})
	if err := cr.stopWorkers(ctx); err != nil {
		return err
	}
	if sink != nil {
		sink.close(ctx)
	}
	cr.storeTotals(ctx)
	cr.stats.CoordinatorCPU = (cpuTime() - cpu0).Seconds() / time.Since(wall0).Seconds()
	cr.stats.WorkersCPU = cr.workersCPU() / time.Since(wall0).Seconds()
	cr.harnessGauges()
	stats, err := json.Marshal(cr.stats)
	if err != nil {
		return fmt.Errorf("encode harness stats: %w", err)
	}
	r.m.emit(history.Event{Type: history.Mark, F: history.MarkHarness, Meta: stats})
	r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseEnd})
	return nil
}

// clusterOptions is how a case's cluster is made: in the run's mode, with
// the proxies, clocks and disk layers its faults need, on a targets
// file's servers when the run has one.
func (r *run) clusterOptions(c *scenario.Case, plan linkPlan) cluster.Options {
	co := cluster.Options{Mode: r.sc.Mode, Proxied: plan.server, Faketime: faketimeServers(c), DiskLayer: needsFuse(c)}
	if t := r.sc.Targets; t != nil {
		co.External = t.Servers
		co.Control = t.Control
		if tp := t.Toxiproxy; tp != nil {
			co.ExternalToxi = &cluster.ExternalToxi{API: tp.API, ListenHost: tp.ListenHost}
		}
		if cp := r.sc.Compose; cp != nil {
			co.Compose = &cluster.Compose{File: cp.File, Project: cp.Project, WorkerImage: cp.WorkerImage}
		}
	}
	return co
}

// healed records that a fault healed at t.
func (cr *caseRun) healed(t int64) {
	cr.liveMu.Lock()
	defer cr.liveMu.Unlock()
	cr.lastHeal = max(cr.lastHeal, t)
}

// watchRecovery keeps the workload running, past the case's duration if
// need be, until the last heal is followed by the time the checker needs
// to judge the recovery (checker/MODEL.md §11): recovers_within, or
// checker.MinEvidence (also for available: false, which needs that much
// clear window to say the lock stayed away); and, without recovers_within, while nothing has
// some key a client asked for has not been acquired since the heal, up to
// MinEvidence past the lock's own expiry bound (a dead holder's lease must
// run out before "never" can be said). A fault whose heal took long (a
// server restarted and waited for) must not leave its recovery undecided
// for want of watching, nor one lane's key served hide another's that is
// not (side by side, every lane's lock must be seen back or seen stuck).
func (cr *caseRun) watchRecovery(ctx context.Context) {
	cr.liveMu.Lock()
	last := cr.lastHeal
	cr.liveMu.Unlock()
	if last == 0 || cr.c.Expect.Measure {
		return
	}
	need, upTo := checker.MinEvidence, checker.MinEvidence+backends.ExpiryBound(cr.c.Backend, cr.c.Workload.TTL.D())
	if b := time.Duration(cr.c.Expect.RecoversWithinNs); b > 0 {
		need, upTo = b+time.Millisecond, b+time.Millisecond // a stretch longer than B
	}
	if cr.c.Expect.Available != nil && !*cr.c.Expect.Available {
		upTo = need // "stays unavailable" needs MinEvidence after the heal, served or not
	}
	if more := time.Duration(last + int64(need) - monoclock.Since(cr.r.base)); more > 0 {
		fmt.Fprintf(cr.r.log, "  the last fault healed %s before the case's end: running %s more to watch the recovery\n",
			(need - more).Round(time.Millisecond), more.Round(time.Millisecond))
		wait.Sleep(ctx, more)
	}
	for ctx.Err() == nil && cr.unservedSince(last) != "" && monoclock.Since(cr.r.base) < last+int64(upTo) {
		cr.watchRounds.Add(1)
		wait.Sleep(ctx, 50*time.Millisecond) // not served since the heal: not yet due back, perhaps
	}
}

// unservedSince returns a key some client asked for that has not been
// acquired since t ("" when every one has).
func (cr *caseRun) unservedSince(t int64) string {
	cr.liveMu.Lock()
	defer cr.liveMu.Unlock()
	for k, at := range cr.served {
		if at < t {
			return k
		}
	}
	return ""
}

// keyPrefix is what every key of the case starts with on servers lockbench
// did not start ("" on its own): the run and the case, so that no two runs
// or cases share a lock, a counter or a row there.
func (cr *caseRun) keyPrefix() string {
	if cr.r.sc.Targets == nil {
		if cr.reusedFrom != "" {
			// A reused cluster still holds the last case's keys, counters
			// and rows: this case's are its own.
			return fmt.Sprintf("c%d-", cr.idx+1)
		}
		return ""
	}
	// No slash: a ZooKeeper node name cannot hold one (it would need
	// parents), and every backend takes a flat name.
	return fmt.Sprintf("lockbench-%s-%s-", cr.r.id, cr.c.Name)
}

// storeTotals records, for a backend whose critical section runs in its
// own database, each key's counter once every client has stopped: the
// checker compares it with the increments the history says were
// committed. A failure to read them is recorded too (the case is then
// invalid: its safety cannot be judged).
func (cr *caseRun) storeTotals(ctx context.Context) {
	v, ok := cr.c.Backend.(backends.Verifier)
	if !ok {
		return
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	e := history.Event{Type: history.Mark, F: history.MarkStoreTotals}
	env := backends.Env{Endpoints: cr.cl.Endpoints()}
	if t := cr.r.sc.Targets; t != nil {
		env.Auth = t.Auth
	}
	totals, err := v.Totals(tctx, env)
	if err == nil {
		// The workers' keys carry the run's prefix on a shared cluster:
		// keep this case's rows, named as the history names them.
		if p := cr.keyPrefix(); p != "" {
			own := map[string]int64{}
			for k, n := range totals {
				if rest, ok := strings.CutPrefix(k, p); ok {
					own[rest] = n
				}
			}
			totals = own
		}
		e.Meta, err = json.Marshal(totals)
	}
	if err != nil {
		e.Err = fmt.Sprintf("read the store's totals: %v", err)
	}
	cr.r.m.emit(e)
}

// faketimeServers lists the servers of a case whose wall clock a fault
// moves: they must start under libfaketime.
func faketimeServers(c *scenario.Case) []string {
	kinds := map[string]string{}
	for _, s := range c.Servers() {
		kinds[s.Name] = s.Kind
	}
	var out []string
	for _, f := range c.Faults {
		info, err := faults.Lookup(f.Type)
		if err != nil {
			continue
		}
		for _, t := range f.Targets {
			if k, ok := kinds[t.Name]; ok && t.Kind == faults.Server && info.Faketime(cluster.FaultKind(k).Abilities) && !slices.Contains(out, t.Name) {
				out = append(out, t.Name)
			}
		}
	}
	return out
}

// needsFuse says whether a fault of the case needs the servers' data dirs
// on a power-loss layer.
func needsFuse(c *scenario.Case) bool {
	for _, f := range c.Faults {
		if info, err := faults.Lookup(f.Type); err == nil && info.NeedsFuse {
			return true
		}
	}
	return false
}

// cpuTime is the coordinator's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// harnessGauges records the coordinator's goroutines, descriptors and heap.
func (cr *caseRun) harnessGauges() {
	cr.stats.Cores = numCPU()
	cr.stats.Goroutines = numGoroutine()
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		cr.stats.FDs = len(fds)
	}
	cr.stats.HeapBytes = heapBytes()
}

// serverKinds lists the kinds of the servers a case starts, each once, in
// order.
func serverKinds(specs []backends.ServerSpec) []string {
	var out []string
	for _, s := range specs {
		if !slices.Contains(out, s.Kind) {
			out = append(out, s.Kind)
		}
	}
	slices.Sort(out)
	return out
}

// keptCluster is a cluster left running for the next case on the same
// servers.
type keptCluster struct {
	key    string
	cl     *cluster.Cluster
	origin string // the case that started it
}

// clusterKey says which cases can share a cluster: the same backend and
// options and the same servers (a job strategy's broker among them), the same proxied server-side links,
// clocks and data-dir layers, in the same mode.
func clusterKey(c *scenario.Case, co cluster.Options) string {
	var servers []string
	for _, s := range c.Servers() {
		servers = append(servers, s.Kind+":"+s.Name)
	}
	return fmt.Sprintf("%s|%s|%q|%q|%q|%s|%v", c.BackendName, c.Options, servers, co.Proxied, co.Faketime, co.Mode, co.DiskLayer)
}

// refreshWait bounds how long a kept cluster may take to answer again.
const refreshWait = 10 * time.Second

// takeKept returns the kept cluster when it is the one this case needs
// and is back at its baseline, with the case that started it; otherwise
// it tears the kept cluster down and returns nil.
func (r *run) takeKept(ctx context.Context, key string) (*cluster.Cluster, string) {
	k := r.kept
	r.kept = nil
	if k == nil {
		return nil, ""
	}
	if k.key == key {
		err := k.cl.Refresh(ctx, refreshWait)
		if err == nil {
			return k.cl, k.origin
		}
		fmt.Fprintf(r.log, "  the cluster of %s is not back at its baseline (%v): starting a fresh one\n", k.origin, err)
	}
	if err := k.cl.Close(); err != nil {
		fmt.Fprintf(r.log, "  tear down the cluster of %s: %v\n", k.origin, err)
	}
	return nil, ""
}

// dropKept tears down the kept cluster, at the end of the run.
func (r *run) dropKept() {
	if r.kept != nil {
		if err := r.kept.cl.Close(); err != nil {
			fmt.Fprintf(r.log, "tear down the cluster of %s: %v\n", r.kept.origin, err)
			r.teardownErrs = append(r.teardownErrs, fmt.Errorf("tear down the cluster of %s: %w", r.kept.origin, err))
		}
		r.kept = nil
	}
}

// keepable reports whether the case's cluster may serve the next case: it
// is lockbench's own on loopback, and no fault left it off its baseline
// (a lasting fault on a server, a heal that failed, a fault that could not
// be applied).
func (cr *caseRun) keepable() bool {
	return cr.cl.Reusable() && !cr.dirty.Load()
}
