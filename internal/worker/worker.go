// Package worker is the code of one application instance: a child process
// of bench (`bench worker`) that runs K concurrent clients against a lock
// backend and streams what they do, as history events, to the coordinator.
//
// An instance is a process, not a goroutine, so that a pause fault can
// freeze all of it (its clients and its lock library's keep-alive
// goroutines) the way a stop-the-world GC pause does. Its clients connect
// from the instance's own source address, through a routed dialer (package
// links), so faults can act on exactly this instance's links.
//
// Protocol: the coordinator writes one JSON Config line on stdin, then
// "start" and, later, "stop" lines. The worker writes events as JSON lines
// on stdout: a "ready" mark once it is connected, a "tick" every TickEvery
// so the coordinator knows how far the instance's clock has got, a "links"
// report every ReportEvery (what crossed each link, and the emitter's
// lag), and every operation event. Events leave in time order: each is
// timestamped and queued under one mutex. Logs go to stderr.
package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/pacer"
	"github.com/lockbench/lockbench/internal/resource"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/lockbench/lockbench/internal/workload"
)

// TickEvery is how often a worker reports its clock.
const TickEvery = 20 * time.Millisecond

// ReportEvery is how often a worker reports its link counters.
const ReportEvery = 100 * time.Millisecond

// Control marks a worker sends besides history events.
const (
	MarkReady   = "ready"   // connected, waiting for start
	MarkTick    = "tick"    // the instance's clock has reached T
	MarkReport  = "links"   // Meta holds a Report
	MarkStopped = "stopped" // every client has finished
)

// ControlMarks are the control marks, for the coordinator's decoder.
var ControlMarks = map[string]bool{MarkReady: true, MarkTick: true, MarkReport: true, MarkStopped: true, MarkAtPhase: true}

// Config is everything a worker needs, sent by the coordinator.
type Config struct {
	Base     int64            `json:"base"` // the run's monotonic base
	Instance history.Instance `json:"instance"`
	// Seed is the seed of the clients' plan (their holds, thinks and key
	// picks): each client draws from it, keyed by PlanInstance and its
	// own number.
	Seed uint64 `json:"seed"`
	// PlanInstance is the instance's number within its trial (a
	// side-by-side lane's instances count from 1), which keys its
	// clients' plan: two lanes given one seed draw the same plan. 0:
	// Instance.
	PlanInstance history.Instance `json:"plan_instance,omitempty"`
	Backend      string           `json:"backend"`
	Options      []byte           `json:"options"` // backend options, YAML
	// Strategy and StrategyOptions (YAML) are a job workload's strategy
	// (package jobs); "" runs the lock loop.
	Strategy        string `json:"strategy,omitempty"`
	StrategyOptions []byte `json:"strategy_options,omitempty"`
	// Endpoints maps server names to real addresses; Routes say how this
	// instance reaches each (directly or through a fault's proxy).
	Endpoints map[string]string `json:"endpoints"`
	Routes    []links.Route     `json:"routes"`
	// Source is the instance's own address, the source of its connections.
	Source string `json:"source"`
	// Mark, when set, is put on every connection of the instance
	// (SO_MARK), for the cuts of an instance from servers its address
	// does not reach (firewall.Endpoint.Mark).
	Mark     int               `json:"mark,omitempty"`
	Resource string            `json:"resource"` // the protected resource's real address
	Workload workload.Workload `json:"workload"`
	// Auth says how to authenticate to servers lockbench did not start:
	// environment variable names and file paths, never values.
	Auth map[string]*backends.Credentials `json:"auth,omitempty"`
	// KeyOffset is added to the number of every key the clients pick: a
	// side-by-side trial's keys are its own.
	KeyOffset int `json:"key_offset,omitempty"`
	// KeyPrefix is put before every key the backend sees (runs against a
	// shared, existing cluster keep to their own keys).
	KeyPrefix string `json:"key_prefix,omitempty"`
	// JobsFirst is the number of the instance's trial's first job: a
	// side-by-side trial's jobs are its own.
	JobsFirst int `json:"jobs_first,omitempty"`
	// Lane is the instance's trial in a batch run side by side (1-based;
	// 0 outside one): its broker's queue and its election are its own
	// (jobs.QueueFor).
	Lane int `json:"lane,omitempty"`
}

// Report is what a worker tells the coordinator every ReportEvery.
type Report struct {
	Links links.Snapshot `json:"links"`
	// EmitLagMax is the longest an event waited, since the last report,
	// between its timestamp and its write to the coordinator: a worker
	// that cannot get its events out is the harness's trouble.
	EmitLagMax int64 `json:"emit_lag_max_ns"`
	// The instance's goroutines, open descriptors and heap.
	Goroutines int   `json:"goroutines"`
	FDs        int   `json:"fds"`
	HeapBytes  int64 `json:"heap_bytes"`
}

// addrs is every address the instance is given.
func (c *Config) addrs() []string {
	out := []string{c.Source, c.Resource}
	for _, a := range c.Endpoints {
		out = append(out, strings.Split(a, ",")...)
	}
	for _, r := range c.Routes {
		out = append(out, r.Addr)
	}
	return out
}

// Run is the body of `bench worker`.
func Run(ctx context.Context, stdin io.Reader, stdout io.Writer, logw io.Writer) error {
	lg := log.New(logw, "", log.Lmicroseconds)
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 0, 64<<10), 4<<20)
	if !in.Scan() {
		return fmt.Errorf("worker: no config on stdin: %v", in.Err())
	}
	var cfg Config
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("worker: config: %w", err)
	}
	if links.AllIPs(cfg.addrs()...) {
		links.RefuseLookups() // nothing to look up: a query would reach outside the run
	}
	growPipe(stdout)
	em := newEmitter(stdout, cfg.Base)
	defer em.close()
	w := cfg.Workload
	be, err := backends.New(cfg.Backend, func(v any) error { return config.DecodeStrictBytes(cfg.Options, v, 0) })
	if err != nil {
		return fmt.Errorf("worker %d: %w", cfg.Instance, err)
	}
	dialer := links.NewDialer(cfg.Source, cfg.Routes, cfg.Mark)
	shared := backends.NewShared()
	defer func() {
		if err := shared.Close(); err != nil {
			lg.Printf("close shared resources: %v", err)
		}
	}()
	lockers := make([]backends.Locker, w.Clients)
	electors := make([]backends.Elector, w.Clients) // unprefixed: a job workload's election has its name from the prefix
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for c := range lockers {
		env := backends.Env{Endpoints: cfg.Endpoints, Dial: dialer.DialContext, TTL: w.TTL.D(), Instance: int(cfg.Instance), Client: c, Shared: shared, Auth: cfg.Auth}
		if lockers[c], err = be.Open(openCtx, env); err != nil {
			cancel()
			return fmt.Errorf("worker %d client %d: open %s: %w", cfg.Instance, c, cfg.Backend, err)
		}
		watchBroken(lockers[c], cfg.Instance, logw)
		electors[c], _ = lockers[c].(backends.Elector)
		lockers[c] = backends.WithKeyPrefix(lockers[c], cfg.KeyPrefix)
		defer lockers[c].Close()
	}
	cancel()

	em.emit(history.Event{Type: history.Mark, F: MarkReady, Proc: history.InstanceProc(cfg.Instance).String()})
	tickCtx, stopTicks := context.WithCancel(ctx)
	defer stopTicks()
	go em.ticks(tickCtx, dialer)

	// Wait for start, then run until stop (or stdin closes).
	for in.Scan() {
		if in.Text() == "start" {
			break
		}
	}
	var stopping atomic.Bool
	g := newGates(em)
	go func() {
		for in.Scan() {
			if in.Text() == "stop" {
				break
			}
			g.command(in.Text())
		}
		stopping.Store(true)
		// Nothing is armed any more: a client waiting at a phase goes on.
		for in.Scan() {
			g.command(in.Text())
		}
	}()
	res := resource.NewMux(cfg.Resource, dialer.DialContext)
	defer res.Close()
	clients := make([]*client, w.Clients)
	plan := cfg.PlanInstance
	if plan == 0 {
		plan = cfg.Instance
	}
	for c := range clients {
		proc := history.ClientProc(cfg.Instance, c).String()
		cl := &client{
			proc:    proc,
			w:       w,
			locker:  lockers[c],
			elector: electors[c],
			res:     res.Client(proc),
			em:      em,
			r:       rand.New(rand.NewPCG(cfg.Seed, uint64(plan)<<16|uint64(c))),
			lg:      lg,
		}
		cl.keys = workload.NewKeyPicker(w.Keys, cl.r, int(plan-1)*w.Clients+c)
		cl.keys.Offset = cfg.KeyOffset
		if ext, ok := lockers[c].(backends.Extender); ok {
			cl.ext = ext
		}
		if st, ok := lockers[c].(backends.Store); ok {
			cl.store = st
		}
		clients[c] = cl
	}
	var wg sync.WaitGroup
	if cfg.Strategy != "" {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		jcs, err := openJobs(jctx, cfg, dialer.DialContext, clients, g)
		cancel()
		if err != nil {
			return fmt.Errorf("worker %d: strategy %s: %w", cfg.Instance, cfg.Strategy, err)
		}
		for _, jc := range jcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer jc.ex.Close()
				cctx, cancel := clientContext(ctx)
				defer cancel()
				wait.Sleep(cctx, w.StartAfter.D())
				if jc.elect {
					defer jc.campaign(cctx)()
				}
				for !stopping.Load() && cctx.Err() == nil {
					jc.attempt(cctx)
				}
			}()
		}
	} else if w.Rate != nil {
		openLoop(ctx, &wg, clients, cfg, em, &stopping)
	} else {
		for _, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cl.res.Close()
				cctx, cancel := clientContext(ctx)
				defer cancel()
				wait.Sleep(cctx, w.StartAfter.D())
				for !stopping.Load() && cctx.Err() == nil {
					cl.cycle(cctx, 0)
				}
			}()
		}
	}
	wg.Wait()
	stopTicks()
	em.emit(history.Event{Type: history.Mark, F: MarkStopped})
	return em.close()
}

// openLoop runs the instance's share of the workload's schedule: every
// attempt goes to an idle client when it is due, or is recorded as dropped
// when none is idle. Clients do not think between attempts.
func openLoop(ctx context.Context, wg *sync.WaitGroup, clients []*client, cfg Config, em *emitter, stopping *atomic.Bool) {
	w := cfg.Workload
	idle := make(chan *client, len(clients))
	for _, cl := range clients {
		cl.attempts = make(chan int64, 1)
		idle <- cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.res.Close()
			cctx, cancel := clientContext(ctx)
			defer cancel()
			for due := range cl.attempts {
				cl.cycle(cctx, due)
				idle <- cl
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			for _, cl := range clients {
				close(cl.attempts)
			}
		}()
		wait.Sleep(ctx, w.StartAfter.D())
		// The schedule goes on at its last rate if the case does (the
		// runner watching a recovery past the duration).
		d := w.Duration.D() - w.StartAfter.D()
		p := pacer.Scaled{P: pacer.Continue(w.Rate.Pacer(d), d), N: uint64(cfg.Instance - 1), Of: uint64(w.Instances)}
		start := monoclock.Since(em.base)
		proc := history.InstanceProc(cfg.Instance).String()
		for hits := uint64(0); !stopping.Load() && ctx.Err() == nil; hits++ {
			d, stop := p.Pace(time.Duration(monoclock.Since(em.base)-start), hits)
			if stop {
				// The schedule is over (it ended at rate 0): the instance
				// lives on until it is told to stop.
				for !stopping.Load() && wait.Sleep(ctx, 10*time.Millisecond) {
				}
				return
			}
			if !wait.Sleep(ctx, d) {
				return
			}
			due, _ := p.Due(hits)
			intended := start + int64(due)
			select {
			case cl := <-idle:
				cl.attempts <- intended
			default:
				em.emit(history.Event{Type: history.OK, F: history.OpDropped, Proc: proc, Intended: intended})
			}
		}
	}()
}

// clientContext is a client's own context: the contexts it makes every
// cycle (acquire and release deadlines) hang from it rather than from one
// shared by every client, whose set of children would be a lock all of
// them contend on.
func clientContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}
