package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/childenv"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/worker"
	"github.com/lockbench/lockbench/internal/workload"
)

// workerProc is one running worker instance.
type workerProc struct {
	n      history.Instance
	name   string // instance-N
	log    string // its log file
	proc   *procgroup.Process
	stdin  io.WriteCloser
	sendMu sync.Mutex // one writer of stdin at a time
	routes []links.Route
	ready  chan error
	done   chan struct{} // its stream has ended and been accounted for

	mu       sync.Mutex
	stop     bool   // a stop was sent: exiting is expected
	killedBy string // the fault that killed it, if one did
	stuck    string // why the harness killed it at the end of the case, if it did
	report   worker.Report
	reportT  int64 // when the last report was made (since the run base)
}

// pausedAround reports whether a pause fault had the instance stopped at
// some point of the report interval that ends at t (since base): events
// it held back meanwhile were late because of the fault, not the harness.
func (w *workerProc) pausedAround(base, t int64) bool {
	return w.proc.StoppedWithin(base+t-int64(2*worker.ReportEvery), base+t)
}

func (cr *caseRun) sortedWorkers() []*workerProc {
	out := make([]*workerProc, 0, len(cr.workers))
	for _, w := range cr.workers {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out
}

func (cr *caseRun) startWorker(n history.Instance, routes []links.Route, logDir string) error {
	name := n.String()
	bin, args := cr.r.opts.WorkerCommand()
	cmd := exec.Command(bin, args...)
	// The worker gets what any program needs and the variables the
	// targets file's credentials name, nothing else of bench's
	// environment (an SSH key, other passwords).
	var secrets []string
	if t := cr.r.sc.Targets; t != nil {
		for _, c := range t.Auth {
			if c != nil {
				secrets = append(secrets, c.UsernameEnv, c.PasswordEnv, c.TokenEnv)
			}
		}
	}
	cmd.Env = childenv.Env(secrets...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("%s stdin: %w", name, err)
	}
	// Not cmd.StdoutPipe: its read end closes when the process exits,
	// and the last events the worker wrote could be lost unread.
	stdout, err := procgroup.OutputPipe(cmd)
	if err != nil {
		return fmt.Errorf("%s stdout: %w", name, err)
	}
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return fmt.Errorf("%s log: %w", name, err)
	}
	cmd.Stderr = logf
	container, err := cr.cl.HostCommand(history.InstanceProc(n).String(), cr.cl.InstanceIP(int(n)), cmd)
	if err != nil {
		logf.Close()
		return fmt.Errorf("%s host: %w", name, err)
	}
	src := cr.idx*1000 + int(n)
	cr.r.m.addSource(src)
	var p *procgroup.Process
	if container != "" {
		p, err = procgroup.StartContainerProcess(name, cr.r.id, container, cmd)
	} else {
		p, err = procgroup.StartProcess(name, cr.r.id, cmd)
	}
	logf.Close()
	if err != nil {
		stdout.Close()
		cr.r.m.removeSource(src)
		return err
	}
	w := &workerProc{n: n, name: name, proc: p, stdin: stdin, routes: routes, ready: make(chan error, 1), done: make(chan struct{}),
		log: filepath.Join(logDir, name+".log")}
	cr.workers[n] = w
	go cr.readWorker(w, src, stdout) // it closes stdout at EOF
	resAddr := cr.res.Addr()
	cfg := worker.Config{Base: cr.r.base, Instance: n, Seed: cr.planSeed(cr.laneOf(n)), PlanInstance: history.Instance(cr.trialInstance(n)), Backend: cr.c.BackendName,
		Options: cr.c.Options, Endpoints: cr.cl.Endpoints(), Routes: routes, Source: cr.cl.InstanceIP(int(n)), Mark: cr.cl.InstanceMark(int(n)),
		Resource: resAddr, Workload: cr.c.Workload.ForInstance(cr.trialInstance(n)), Strategy: cr.c.StrategyName, StrategyOptions: cr.c.StrategyOptions}
	if t := cr.r.sc.Targets; t != nil {
		cfg.Auth = t.Auth
	}
	cfg.KeyPrefix = cr.keyPrefix()
	if l := cr.laneOf(n); l > 0 {
		cfg.KeyOffset = (l - 1) * cr.c.Workload.Keys.Count
		cfg.JobsFirst = (l - 1) * cr.c.Workload.Jobs.Count
		cfg.Lane = l
	}
	line, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("%s config: %w", name, err)
	}
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%s config: %w", name, err)
	}
	return nil
}

// awaitReady waits until every worker has connected to the cluster.
func (cr *caseRun) awaitReady(ctx context.Context, logDir string) error {
	deadline := time.Now().Add(60 * time.Second)
	for _, w := range cr.sortedWorkers() {
		select {
		case err := <-w.ready:
			if err != nil {
				return fmt.Errorf("%s: %w\nlast lines of its log:\n%s", w.name, err, cluster.Tail(filepath.Join(logDir, w.name+".log"), 10))
			}
		case <-time.After(time.Until(deadline)):
			return fmt.Errorf("%s did not become ready within 60s", w.name)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// readWorker feeds a worker's event stream into the merger until it ends.
func (cr *caseRun) readWorker(w *workerProc, src int, stdout io.ReadCloser) {
	defer close(w.done)
	defer stdout.Close()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	readySent := false
	dec := history.NewDecoder()
	dec.Control = worker.ControlMarks
	var e history.Event
	for sc.Scan() {
		if err := dec.Decode(sc.Bytes(), &e); err != nil {
			cr.liveMu.Lock()
			cr.stats.BadLines++
			cr.liveMu.Unlock()
			fmt.Fprintf(cr.r.log, "  %s: bad event line %q: %v\n", w.name, sc.Text(), err)
			continue
		}
		switch e.F {
		case worker.MarkReady:
			if !readySent {
				w.ready <- nil
				readySent = true
			}
			cr.r.m.advance(src, e.T)
		case worker.MarkTick, worker.MarkStopped:
			cr.r.m.advance(src, e.T)
		case worker.MarkAtPhase:
			cr.atPhase(w, &e)
			cr.r.m.advance(src, e.T)
		case worker.MarkReport:
			var rep worker.Report
			if err := json.Unmarshal(e.Meta, &rep); err == nil {
				w.mu.Lock()
				w.report, w.reportT = rep, e.T
				w.mu.Unlock()
				paused := w.pausedAround(cr.r.base, e.T)
				cr.liveMu.Lock()
				if rep.EmitLagMax > cr.stats.EmitLagMaxNs && !paused {
					cr.stats.EmitLagMaxNs = rep.EmitLagMax
				}
				cr.stats.WorkerGoroutines = max(cr.stats.WorkerGoroutines, rep.Goroutines)
				cr.stats.WorkerFDs = max(cr.stats.WorkerFDs, rep.FDs)
				cr.stats.WorkerHeapBytes = max(cr.stats.WorkerHeapBytes, rep.HeapBytes)
				cr.liveMu.Unlock()
			}
			cr.r.m.advance(src, e.T)
		default:
			if e.F == history.OpAcquire && e.Type == history.OK {
				cr.r.acquired.Add(1)
			}
			if e.F == history.OpAcquire {
				cr.liveMu.Lock()
				if e.Type == history.Invoke {
					cr.waiting[e.Proc] = true
				} else {
					delete(cr.waiting, e.Proc)
				}
				switch {
				case e.Type == history.OK:
					cr.served[e.Key] = e.T
				case e.Key != "":
					if _, ok := cr.served[e.Key]; !ok {
						cr.served[e.Key] = 0
					}
				}
				cr.liveMu.Unlock()
			}
			if e.F == history.OpStore || e.F == history.OpJob {
				// A critical section run in the backend's database, or a
				// job's attempt, never reaches the resource: its events
				// say who is inside.
				cr.liveMu.Lock()
				if e.Type == history.Invoke {
					cr.storing[e.Proc] = e.Key
					cr.storeSince[e.Proc] = e.T
				} else {
					delete(cr.storing, e.Proc)
					delete(cr.storeSince, e.Proc)
				}
				cr.liveMu.Unlock()
			}
			cr.r.m.pushLine(src, e.T, sc.Bytes())
		}
	}
	<-w.proc.Done()
	if !readySent {
		w.ready <- fmt.Errorf("exited before it was ready: %v", w.proc.ExitErr())
	}
	w.mu.Lock()
	expected := w.stop && w.proc.ExitErr() == nil
	killedBy, why := w.killedBy, fmt.Sprint(w.proc.ExitErr())
	if w.stuck != "" {
		why = w.stuck
	} else if !expected && killedBy == "" {
		why += lastWords(w.log)
	}
	w.mu.Unlock()
	if !expected && readySent {
		cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkCrash, Proc: history.InstanceProc(w.n).String(),
			Fault: killedBy, Err: why})
	}
	cr.r.m.removeSource(src)
}

// lastWords is ": " and the last line of a worker's log that says why it
// ended ("bench: ...", as a worker writes it before it exits on an
// error: a driver that broke, a backend that failed), or "".
func lastWords(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-20; i-- {
		if strings.HasPrefix(lines[i], "bench: ") {
			return ": " + lines[i]
		}
	}
	return ""
}

// stopWorkers asks every worker to stop, and kills each one that has not
// stopped by the shared deadline: every late worker is killed, not only
// the first.
func (cr *caseRun) stopWorkers(ctx context.Context) error {
	ws := cr.sortedWorkers()
	for _, w := range ws {
		w.mu.Lock()
		w.stop = true
		w.mu.Unlock()
		if w.proc.Alive() {
			if err := w.send("stop"); err != nil {
				fmt.Fprintf(cr.r.log, "  %s: send stop: %v\n", w.name, err)
			}
		}
	}
	wl := cr.c.Workload
	grace := wl.Longest(func(w workload.Workload) time.Duration {
		return w.AcquireTimeout.D() + w.Hold.Max.D() + w.Hold.Value.D()
	}) + 3*wl.OpTimeout.D() + 5*time.Second
	deadline := time.Now().Add(grace)
	for _, w := range ws {
		select {
		case <-w.done:
			continue
		case <-time.After(time.Until(deadline)):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		fmt.Fprintf(cr.r.log, "  %s did not stop within %s: killed\n", w.name, grace)
		w.mu.Lock()
		w.stop = false // its exit is now a crash
		w.stuck = fmt.Sprintf("did not stop within %s of being asked to: killed by the harness", grace)
		w.mu.Unlock()
		if err := w.proc.Kill(5 * time.Second); err != nil {
			return err
		}
		<-w.done
	}
	return nil
}

func (cr *caseRun) killWorkers() {
	for _, w := range cr.workers {
		if err := w.proc.Kill(5 * time.Second); err != nil {
			fmt.Fprintf(cr.r.log, "  %v\n", err)
		}
		w.stdin.Close()
	}
	for _, w := range cr.workers {
		<-w.done
	}
}

// workersCPU is the CPU time, in seconds, of the workers that exited.
func (cr *caseRun) workersCPU() float64 {
	var t time.Duration
	for _, w := range cr.workers {
		t += w.proc.CPU()
	}
	return t.Seconds()
}

// traffic sums what crossed a link (a server's client link, one
// instance's, or the resource's) in the reports that the instances
// carrying it made after the call began, waiting up to a second for them.
// Instances that are stopped or gone cannot report: their last report
// counts. A server-side link is counted by its relay.
func (cr *caseRun) traffic(ctx context.Context, link faults.Target) (links.Counts, error) {
	if c, ok := cr.acts.RelayCounts(link.Link()); ok {
		return c, nil
	}
	since := monoclock.Since(cr.r.base)
	deadline := time.Now().Add(time.Second)
	for {
		var sum links.Counts
		fresh := true
		for _, w := range cr.sortedWorkers() {
			if link.Instance != 0 && w.n != link.Instance {
				continue
			}
			w.mu.Lock()
			c, t := w.report.Links[link.Name], w.reportT
			w.mu.Unlock()
			if t < since && w.proc.Alive() {
				if stopped, _ := w.proc.Stopped(); !stopped {
					fresh = false
				}
			}
			sum = sum.Add(c)
		}
		if fresh || time.Now().After(deadline) {
			return sum, nil
		}
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func numCPU() int       { return runtime.NumCPU() }
func numGoroutine() int { return runtime.NumGoroutine() }
func heapBytes() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
