package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/history"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/resource"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/internal/worker"
)

// FaultRecord is one line of faults.jsonl: a scheduled fault and the window
// in which it was really in effect.
type FaultRecord struct {
	Case      string `json:"case"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	Target    string `json:"target"`             // as written in the scenario
	Resolved  string `json:"resolved,omitempty"` // the concrete target hit
	AtNs      int64  `json:"scheduled_at_ns"`    // since the case start
	ForNs     int64  `json:"scheduled_for_ns"`
	StartNs   int64  `json:"start_ns,omitempty"` // since the run base
	EndNs     int64  `json:"end_ns,omitempty"`
	Applied   bool   `json:"applied"`
	Emulated  string `json:"emulated,omitempty"` // how the fault was emulated, if it was
	Error     string `json:"error,omitempty"`
	HealError string `json:"heal_error,omitempty"`
}

// workerProc is one running worker instance.
type workerProc struct {
	n      int
	name   string // instance-N
	proc   *cluster.Process
	stdin  io.WriteCloser
	ready  chan error
	done   chan struct{} // its stream has ended and been accounted for
	stopMu sync.Mutex
	stop   bool // a stop was sent: exiting is expected
}

type caseRun struct {
	r       *run
	c       *scenario.Case
	idx     int
	cl      *cluster.Cluster
	res     *resource.Server
	workers map[string]*workerProc
	start   int64 // case start, since run base

	liveMu  sync.Mutex
	waiting map[string]bool // clients with an acquire in flight, as events arrive
}

func (r *run) runCase(ctx context.Context, c *scenario.Case, idx int) (err error) {
	logDir := filepath.Join(r.dir, "logs", c.Name)
	cl, err := cluster.New(r.id, logDir)
	if err != nil {
		return err
	}
	cr := &caseRun{r: r, c: c, idx: idx, cl: cl, workers: map[string]*workerProc{}, waiting: map[string]bool{}}
	defer func() {
		// Teardown runs on success, error, interrupt and panic alike.
		cr.killWorkers()
		if cerr := cl.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("tear down cluster: %w", cerr)
		}
		if cr.res != nil {
			if rerr := cr.res.Close(); rerr != nil && err == nil {
				err = fmt.Errorf("close resource: %w", rerr)
			}
		}
	}()
	if err := cl.Start(ctx, c.Backend.Servers()); err != nil {
		return err
	}
	cr.res, err = resource.Listen(func(e *history.Event) { r.m.emit(*e) })
	if err != nil {
		return err
	}
	resProxy, err := cl.Toxi.Proxy("resource", cr.res.Addr())
	if err != nil {
		return err
	}
	endpoints := cl.Endpoints()
	for i := 1; i <= c.Workload.Instances; i++ {
		eps, err := cr.instanceLinks(i, endpoints)
		if err != nil {
			return err
		}
		if err := cr.startWorker(ctx, i, eps, resProxy.Listen, logDir); err != nil {
			return err
		}
	}
	for _, w := range cr.sortedWorkers() {
		select {
		case err := <-w.ready:
			if err != nil {
				return fmt.Errorf("%s: %w\nlast lines of its log:\n%s", w.name, err, cluster.Tail(filepath.Join(logDir, w.name+".log"), 10))
			}
		case <-time.After(60 * time.Second):
			return fmt.Errorf("%s did not become ready within 60s", w.name)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}

	meta, err := json.Marshal(c.Meta())
	if err != nil {
		return fmt.Errorf("encode case meta: %w", err)
	}
	r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseStart, Meta: meta})
	cr.start = monoclock.Since(r.base)
	for _, w := range cr.sortedWorkers() {
		if _, err := io.WriteString(w.stdin, "start\n"); err != nil {
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
	for _, f := range c.Faults {
		fwg.Add(1)
		choice := rng.Uint64()
		go func() {
			defer fwg.Done()
			cr.runFault(faultCtx, f, choice)
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
	for _, w := range cr.sortedWorkers() {
		w.stopMu.Lock()
		w.stop = true
		w.stopMu.Unlock()
		if w.proc.Alive() {
			if _, err := io.WriteString(w.stdin, "stop\n"); err != nil {
				fmt.Fprintf(r.log, "  %s: send stop: %v\n", w.name, err)
			}
		}
	}
	grace := c.Workload.AcquireTimeout.D() + c.Workload.Hold.Max.D() + c.Workload.Hold.Value.D() + 3*c.Workload.OpTimeout.D() + 5*time.Second
	deadline := time.After(grace)
	for _, w := range cr.sortedWorkers() {
		select {
		case <-w.done:
		case <-deadline:
			fmt.Fprintf(r.log, "  %s did not stop within %s: killed\n", w.name, grace)
			w.stopMu.Lock()
			w.stop = false // its exit is now a crash
			w.stopMu.Unlock()
			if err := w.proc.Kill(5 * time.Second); err != nil {
				return err
			}
			<-w.done
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseEnd})
	return nil
}

// instanceLinks gives instance n its own proxy in front of each server that
// a fault of the case targets per instance (link:<server>@instance-<n>), so
// that one instance can be cut from some servers while others are not
// (Kleppmann's Redlock example needs it). The per-instance proxy leads to the
// shared one, so link:<server> faults still apply to everyone. Servers no
// such fault names are reached directly through the shared proxy.
func (cr *caseRun) instanceLinks(n int, shared map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(shared))
	for name, addr := range shared {
		out[name] = addr
	}
	inst := fmt.Sprintf("instance-%d", n)
	for _, f := range cr.c.Faults {
		link, isLink := strings.CutPrefix(f.Target, "link:")
		server, _, perInstance := strings.Cut(link, "@")
		if !isLink || !perInstance || out[server] != shared[server] {
			continue // not a per-instance link, or already made for this server
		}
		p, err := cr.cl.Toxi.Proxy(server+"@"+inst, shared[server])
		if err != nil {
			return nil, err
		}
		out[server] = p.Listen
	}
	return out, nil
}

func (cr *caseRun) sortedWorkers() []*workerProc {
	out := make([]*workerProc, 0, len(cr.workers))
	for _, w := range cr.workers {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out
}

func (cr *caseRun) startWorker(ctx context.Context, n int, endpoints map[string]string, resAddr, logDir string) error {
	name := fmt.Sprintf("instance-%d", n)
	bin, args := cr.r.opts.WorkerCommand()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("%s stdin: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("%s stdout: %w", name, err)
	}
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return fmt.Errorf("%s log: %w", name, err)
	}
	cmd.Stderr = logf
	src := cr.idx*1000 + n
	cr.r.m.addSource(src)
	p, err := cluster.StartProcess(name, cr.r.id, cmd)
	logf.Close()
	if err != nil {
		cr.r.m.removeSource(src)
		return err
	}
	w := &workerProc{n: n, name: name, proc: p, stdin: stdin, ready: make(chan error, 1), done: make(chan struct{})}
	cr.workers[name] = w
	cfg := worker.Config{Base: cr.r.base, Instance: n, Seed: cr.r.caseSeed(cr.idx), Backend: cr.c.BackendName,
		Options: cr.c.Options, Endpoints: endpoints, Resource: resAddr, Workload: cr.c.Workload}
	line, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("%s config: %w", name, err)
	}
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%s config: %w", name, err)
	}
	go cr.readWorker(w, src, stdout)
	return nil
}

// readWorker feeds a worker's event stream into the merger until it ends.
func (cr *caseRun) readWorker(w *workerProc, src int, stdout io.Reader) {
	defer close(w.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	readySent := false
	for sc.Scan() {
		var e history.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintf(cr.r.log, "  %s: bad event line %q: %v\n", w.name, sc.Text(), err)
			continue
		}
		switch e.F {
		case worker.MarkReady:
			if !readySent {
				w.ready <- nil
				readySent = true
			}
			cr.r.m.push(src, &e, true)
		case worker.MarkTick:
			cr.r.m.push(src, &e, true)
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
				cr.liveMu.Unlock()
			}
			cr.r.m.push(src, &e, false)
		}
	}
	<-w.proc.Done()
	if !readySent {
		w.ready <- fmt.Errorf("exited before it was ready: %v", w.proc.ExitErr())
	}
	w.stopMu.Lock()
	expected := w.stop && w.proc.ExitErr() == nil
	w.stopMu.Unlock()
	if !expected && readySent {
		cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkCrash, Proc: fmt.Sprintf("i%d", w.n),
			Err: fmt.Sprint(w.proc.ExitErr())})
	}
	cr.r.m.removeSource(src)
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

// runFault waits for the fault's time, applies it, keeps it for its window,
// heals it, and records what really happened. choice seeds the pick among
// several candidates for a role target.
func (cr *caseRun) runFault(ctx context.Context, f *scenario.Fault, choice uint64) {
	rec := FaultRecord{Case: cr.c.Name, Name: f.Name, Type: f.Type, Target: f.Target, AtNs: int64(f.At), ForNs: int64(f.For)}
	if info, err := faults.Lookup(f.Type); err == nil {
		rec.Emulated = info.Emulated
	}
	defer cr.r.recordFault(&rec)
	fail := func(err error) {
		rec.Error = err.Error()
		cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultError, Fault: f.Name, Target: f.Target, Err: rec.Error})
	}
	wait := time.Duration(cr.start + int64(f.At) - monoclock.Since(cr.r.base))
	if !sleepCtx(ctx, wait) {
		fail(errors.New("the case ended before the fault's time"))
		return
	}
	target := f.Target
	if faults.IsRole(target) {
		var err error
		if target, err = cr.resolveRole(ctx, target, choice); err != nil {
			fail(err)
			return
		}
	}
	rec.Resolved = target
	env := &faultEnv{cr: cr}
	if err := env.healthy(target); err != nil {
		fail(fmt.Errorf("target not healthy before injection: %w", err))
		return
	}
	heal, err := f.Fault.Start(context.WithoutCancel(ctx), env, target)
	if err != nil {
		fail(err)
		return
	}
	rec.Applied = true
	rec.StartNs = monoclock.Since(cr.r.base)
	cr.r.fault.Store(fmt.Sprintf("%s (%s %s)", f.Name, f.Type, target))
	cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultStart, Fault: f.Name, Target: target})
	fmt.Fprintf(cr.r.log, "  fault %s: %s on %s for %s\n", f.Name, f.Type, target, f.For)
	sleepCtx(ctx, f.For)
	hctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := heal(hctx); err != nil {
		rec.HealError = err.Error()
		fmt.Fprintf(cr.r.log, "  fault %s: heal: %v\n", f.Name, err)
	}
	rec.EndNs = monoclock.Since(cr.r.base)
	cr.r.fault.Store("")
	cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultEnd, Fault: f.Name, Target: target, Err: rec.HealError})
}

// resolveRole waits until the role has a concrete target and returns it:
// holder (a client inside its critical section: it has read the protected
// resource and not yet written), holder-of:<key>, a-waiter (a client with an
// acquire in flight), leader or master. choice picks among candidates, so a
// seed replays the same pick when the same candidates exist.
func (cr *caseRun) resolveRole(ctx context.Context, role string, choice uint64) (string, error) {
	for {
		var cands []string
		switch {
		case role == faults.RoleLeader || role == faults.RoleMaster:
			if name, err := cr.cl.Leader(ctx); err == nil {
				cands = []string{name}
			}
		case role == faults.RoleWaiter:
			cr.liveMu.Lock()
			for proc := range cr.waiting {
				cands = append(cands, instanceOf(proc))
			}
			cr.liveMu.Unlock()
		default:
			key, only := strings.CutPrefix(role, faults.RoleHolderOf)
			for proc, k := range cr.res.InCriticalSection() {
				if !only || k == key {
					cands = append(cands, instanceOf(proc))
				}
			}
		}
		alive := cands[:0]
		for _, c := range cands {
			if w := cr.workers[c]; w != nil && !w.proc.Alive() {
				continue
			}
			alive = append(alive, c)
		}
		if len(alive) > 0 {
			sort.Strings(alive)
			return alive[choice%uint64(len(alive))], nil
		}
		if !sleepCtx(ctx, time.Millisecond) {
			return "", fmt.Errorf("role %s could not be resolved before the case ended", role)
		}
	}
}

// instanceOf maps a client "i2c0" to its instance "instance-2".
func instanceOf(proc string) string {
	s := strings.TrimPrefix(proc, "i")
	if i := strings.IndexByte(s, 'c'); i >= 0 {
		s = s[:i]
	}
	if _, err := strconv.Atoi(s); err != nil {
		return ""
	}
	return "instance-" + s
}

func (r *run) recordFault(rec *FaultRecord) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if err := r.faults.Encode(rec); err != nil {
		fmt.Fprintf(r.log, "write faults.jsonl: %v\n", err)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// faultEnv gives faults access to the running case.
type faultEnv struct{ cr *caseRun }

func (e *faultEnv) Link(name string) (*toxiclient.Proxy, error) {
	p, err := e.cr.cl.Toxi.Client.Proxy(name)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	return p, nil
}

func (e *faultEnv) Signal(target string, sig syscall.Signal) error {
	if w := e.cr.workers[target]; w != nil {
		return w.proc.Signal(sig)
	}
	return e.cr.cl.Signal(target, sig)
}

func (e *faultEnv) Kill(target string) error {
	if w := e.cr.workers[target]; w != nil {
		return w.proc.Kill(5 * time.Second)
	}
	return e.cr.cl.Kill(target)
}

func (e *faultEnv) Server(name string) (string, string, error) {
	s := e.cr.cl.Server(name)
	if s == nil {
		return "", "", fmt.Errorf("no server %q", name)
	}
	return s.Addr, s.Spec.Kind, nil
}

func (e *faultEnv) Peers(name string) []string { return e.cr.cl.Peers(name) }

func (e *faultEnv) Cut(from, to string) (func() error, error) { return e.cr.cl.Cut(from, to) }

func (e *faultEnv) Restart(ctx context.Context, server string) error {
	return e.cr.cl.Restart(ctx, server)
}

// healthy checks a target before a fault is injected into it.
func (e *faultEnv) healthy(target string) error {
	switch faults.KindOf(target) {
	case faults.Instance:
		w := e.cr.workers[target]
		if w == nil || !w.proc.Alive() {
			return fmt.Errorf("%s is not running", target)
		}
	case faults.Server:
		s := e.cr.cl.Server(target)
		if s == nil || !s.Process().Alive() {
			return fmt.Errorf("%s is not running", target)
		}
	case faults.Link:
		if _, err := e.Link(strings.TrimPrefix(target, "link:")); err != nil {
			return err
		}
	}
	return nil
}

// progress prints a status line for the case every second until stopped.
func (r *run) progress(c *scenario.Case, idx int) (stop func()) {
	w := r.opts.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				f, _ := r.fault.Load().(string)
				if f == "" {
					f = "none"
				}
				fmt.Fprintf(w, "\r\033[K[%d/%d %s] %s/%s  acquisitions %d  fault: %s", idx+1, r.ncases, c.Name,
					time.Since(start).Round(time.Second), c.Workload.Duration, r.acquired.Load(), f)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
