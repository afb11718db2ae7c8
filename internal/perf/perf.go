// Package perf measures what the harness costs: for a backend, a bare lock
// loop (the same backend code, client library and scripts, no harness: no
// worker process, no events, no resource, no checker) and the harness on
// the same workload, run one after the other, repeatedly, so that their
// ratio is measured side by side on the same machine at the same time.
package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/runner"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/verdict"
)

// Options configure a measurement.
type Options struct {
	Backends []string
	Clients  int           // concurrent clients, each on a key of its own
	Duration time.Duration // of each measured run
	Rounds   int           // how many times each variant runs (interleaved)
	Dir      string        // where the harness runs write their results
	Log      io.Writer
	// WorkerCommand is passed to the runner (tests run their own binary).
	WorkerCommand func() (string, []string)
	// Bare, when set, is the bare loop instead of the backend's own Locker
	// in process: a driver's library loop in its own process (bench
	// driver perf).
	Bare func(ctx context.Context, backend string) (Sample, error)
}

// Variant is one way of running the workload.
type Variant string

// The variants, in the order each round runs them.
const (
	Bare   Variant = "bare"   // the lock loop alone
	Full   Variant = "full"   // the harness, with the protected resource
	Direct Variant = "direct" // the harness, no resource (the lock and the recording only)
)

// Sample is one measured run.
type Sample struct {
	Cycles   float64 // acquire+release cycles per second
	CPUCores float64 // CPU the harness itself used (coordinator and workers; the loop's process for bare)
	Coord    float64 // the coordinator's share of that
	// Errors counts bare-loop calls with an unknown outcome (a server
	// timeout): like the harness's clients, the loop goes on after one.
	Errors int64
}

// Result is a backend's samples per variant.
type Result struct {
	Backend string
	Samples map[Variant][]Sample
}

// Median returns the median cycles per second of a variant.
func (r Result) Median(v Variant) float64 {
	var xs []float64
	for _, s := range r.Samples[v] {
		xs = append(xs, s.Cycles)
	}
	return median(xs)
}

// MedianCPU returns the median CPU of a variant (cores; coordinator).
func (r Result) MedianCPU(v Variant) (float64, float64) {
	var all, coord []float64
	for _, s := range r.Samples[v] {
		all = append(all, s.CPUCores)
		coord = append(coord, s.Coord)
	}
	return median(all), median(coord)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Run measures every backend: Rounds rounds of bare, full and direct.
func Run(ctx context.Context, o Options) ([]Result, error) {
	var out []Result
	for _, b := range o.Backends {
		res := Result{Backend: b, Samples: map[Variant][]Sample{}}
		for round := 1; round <= o.Rounds; round++ {
			for _, v := range []Variant{Bare, Full, Direct} {
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				var s Sample
				var err error
				switch {
				case v == Bare && o.Bare != nil:
					s, err = o.Bare(ctx, b)
				case v == Bare:
					s, err = bareLoop(ctx, o, b)
				default:
					s, err = harness(ctx, o, b, v, round)
				}
				if err != nil {
					return out, fmt.Errorf("%s %s round %d: %w", b, v, round, err)
				}
				fmt.Fprintf(o.Log, "%-8s %-7s round %d: %8.0f cycles/s, %.2f cores", b, v, round, s.Cycles, s.CPUCores)
				if s.Errors > 0 {
					fmt.Fprintf(o.Log, ", %d call(s) with an unknown outcome", s.Errors)
				}
				fmt.Fprintln(o.Log)
				res.Samples[v] = append(res.Samples[v], s)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// workload is the measured workload: every client on a key of its own, no
// hold, no think, so that the lock's round trips are all there is.
func workload(o Options, resource bool) string {
	return fmt.Sprintf("{duration: %s, instances: 1, clients: %d, keys: {count: %d, pick: per-client}, hold: {dist: constant, value: 0s}, think: {dist: constant, value: 0s}, ttl: 2s, resource: %v}",
		o.Duration, o.Clients, o.Clients, resource)
}

func harness(ctx context.Context, o Options, backend string, v Variant, round int) (Sample, error) {
	// A name is letters, digits, '-' and '_': a driver's backend
	// (driver:redis-py) names its case without the colon.
	name := strings.NewReplacer(":", "-", "@", "-").Replace(backend)
	src := fmt.Sprintf("name: perf-%s-%s\nworkload: %s\ncases: [{name: %s, backend: %q}]\n", name, v, workload(o, v == Full), name, backend)
	sc, err := scenario.Parse("perf.yaml", []byte(src))
	if err != nil {
		return Sample{}, err
	}
	dir := filepath.Join(o.Dir, fmt.Sprintf("%s-%s-%d", backend, v, round))
	out, err := runner.Run(ctx, sc, runner.Options{Dir: dir, Clean: true, WorkerCommand: o.WorkerCommand})
	if err != nil {
		return Sample{}, err
	}
	sum, err := verdict.AnalyzeFile(filepath.Join(out.Dir, layout.HistoryFile))
	if err != nil {
		return Sample{}, err
	}
	c := sum.Cases[0]
	if c.Check.Status != "ok" {
		return Sample{}, fmt.Errorf("the harness run was %s: %v", c.Check.Status, c.Check.Invalid)
	}
	s := Sample{Cycles: c.Metrics.AcquiresPerSec}
	if st := c.Check.Harness.Stats; st != nil {
		s.CPUCores, s.Coord = st.CoordinatorCPU+st.WorkersCPU, st.CoordinatorCPU
	}
	return s, nil
}

// bareLoop runs the backend's own Locker, as a worker's clients do, with no
// harness around it: acquire, release, again, for the duration.
func bareLoop(ctx context.Context, o Options, backend string) (Sample, error) {
	be, err := backends.New(backend, func(v any) error { return config.DecodeStrictBytes([]byte("{}"), v, 0) })
	if err != nil {
		return Sample{}, err
	}
	cl, err := cluster.New("perf-bare", filepath.Join(o.Dir, "bare-logs", backend))
	if err != nil {
		return Sample{}, err
	}
	defer cl.Close()
	if err := cl.Start(ctx, be.Servers()); err != nil {
		return Sample{}, err
	}
	shared := backends.NewShared()
	defer shared.Close()
	lockers := make([]backends.Locker, o.Clients)
	for i := range lockers {
		l, err := be.Open(ctx, backends.Env{Endpoints: cl.Endpoints(), TTL: 2 * time.Second, Instance: 1, Client: i, Shared: shared})
		if err != nil {
			return Sample{}, err
		}
		defer l.Close()
		lockers[i] = l
	}
	var cycles, errs atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	cpu0, start := cpuTime(), time.Now()
	var wg sync.WaitGroup
	for i, l := range lockers {
		key := fmt.Sprintf("k%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				lease, err := l.Acquire(runCtx, key)
				if errors.Is(err, backends.ErrNotAcquired) {
					continue
				}
				if err != nil {
					if runCtx.Err() == nil {
						errs.Add(1) // unknown outcome: go on, as a client would
					}
					continue
				}
				rctx, rcancel := context.WithTimeout(ctx, time.Second)
				err = l.Release(rctx, lease)
				rcancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	return Sample{Cycles: float64(cycles.Load()) / wall, CPUCores: (cpuTime() - cpu0).Seconds() / wall, Errors: errs.Load()}, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Ratios returns, round by round, a variant's cycles over the bare loop's
// of the same round: the rounds are interleaved, so each pair saw the
// machine in the same state, and their spread says how far to trust the
// ratio of the medians.
func (r Result) Ratios(v Variant) []float64 {
	var out []float64
	for i, s := range r.Samples[v] {
		if i < len(r.Samples[Bare]) && r.Samples[Bare][i].Cycles > 0 {
			out = append(out, s.Cycles/r.Samples[Bare][i].Cycles)
		}
	}
	return out
}

// spread formats the range of a variant's per-round ratios.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// Table prints the results as a Markdown table.
func Table(w io.Writer, rs []Result, o Options) {
	fmt.Fprintf(w, "| backend | bare loop cycles/s | full harness | full / bare (rounds) | direct, no resource | direct / bare (rounds) | harness CPU, full (coordinator) | bare loop CPU |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		bare, full, direct := r.Median(Bare), r.Median(Full), r.Median(Direct)
		fc, fcoord := r.MedianCPU(Full)
		bc, _ := r.MedianCPU(Bare)
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f× (%s) | %.0f | %.2f× (%s) | %.2f cores (%.2f) | %.2f cores |\n",
			r.Backend, bare, full, full/bare, spread(r.Ratios(Full)), direct, direct/bare, spread(r.Ratios(Direct)), fc, fcoord, bc)
	}
	fmt.Fprintf(w, "\n%d clients on keys of their own, no hold, no think; medians of %d interleaved rounds of %s each; in brackets, the range of the rounds' own ratios.\n",
		o.Clients, o.Rounds, o.Duration)
}
