// Package runner is the coordinator of a run: for each case of a scenario it
// starts the backend's cluster, the protected resource and the worker
// processes, runs the workload with its fault schedule, merges the workers'
// events into history.jsonl and tears everything down. It records; it does
// not judge: the CLI hands the history to the checker and the report layer.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/internal/version"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/scenario"
)

// Options configure a run.
type Options struct {
	// ResultsRoot is the folder under which the run's folder is created.
	ResultsRoot string
	// Dir, if set, is the exact results folder to use instead. It must be
	// empty or missing unless Clean is set.
	Dir string
	// Clean allows Dir to hold an earlier run, whose files are removed.
	Clean bool
	// Seed overrides the scenario's seed when non-nil.
	Seed *int64
	// Only runs just the cases with these names (all when empty).
	Only []string
	// WorkerCommand returns the command of one worker process; by default
	// this binary with the argument "worker".
	WorkerCommand func() (string, []string)
	// Log receives progress lines.
	Log io.Writer
	// Progress, when set, receives a status line every second (elapsed,
	// acquisitions so far, current fault), rewritten in place: for a
	// terminal, not for CI logs.
	Progress io.Writer
	// OnCase, when set, receives each case's history lines as soon as
	// the case has ended and they are written, so that its verdict can be
	// said then rather than at the end of the run.
	OnCase func(history []byte)
}

// Outcome is what a run produced: its results folder and run.json.
type Outcome struct {
	Dir  string
	Info layout.Run
}

type run struct {
	opts Options
	// teardownErrs are the teardowns that failed: an interrupted run
	// with one does not exit 105 ("everything was torn down").
	teardownErrs []error
	sc           *scenario.Scenario
	seed         int64
	id           string
	dir          string
	base         int64
	m            *merger
	faults       *json.Encoder
	fmu          sync.Mutex
	log          io.Writer

	ncases   int
	acquired atomic.Int64 // successful acquisitions of the current case, live
	fault    atomic.Value // string: faults in effect now
	info     *layout.Run
	infoMu   sync.Mutex
	// kept is the cluster the last case left at its baseline, for the
	// next case on the same servers.
	kept *keptCluster
	// written is how much of the history OnCase has been handed.
	written int64
}

// Run executes the scenario. The returned error carries an exit code; a run
// that completed returns a nil error and its Outcome, whose statuses decide
// the exit code.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (*Outcome, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.WorkerCommand == nil {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable for workers: %w", err)
		}
		opts.WorkerCommand = func() (string, []string) { return self, []string{"worker"} }
	}
	cases, err := selectCases(sc, opts.Only)
	if err != nil {
		return nil, exitcode.With(err, exitcode.Config)
	}
	for _, c := range cases {
		if sc.Targets != nil {
			break // the servers are not started here
		}
		if err := cluster.CheckBinaries(c.Servers()); err != nil {
			return nil, exitcode.With(err, exitcode.Harness)
		}
	}
	if sc.Targets == nil {
		// Every server is lockbench's own, on an address it chose: no
		// name to look up, and a library's query would reach outside
		// the run (links.RefuseLookups).
		links.RefuseLookups()
	}
	r := &run{opts: opts, sc: sc, seed: sc.Seed, log: opts.Log}
	if opts.Seed != nil {
		r.seed = *opts.Seed
	}
	started := time.Now()
	r.id = fmt.Sprintf("%s-%s-%d", started.UTC().Format("20060102T150405Z"), sc.Name, os.Getpid())
	r.dir = opts.Dir
	if r.dir != "" {
		if err := layout.Claim(r.dir, opts.Clean); err != nil {
			if errors.Is(err, layout.ErrExists) {
				return nil, exitcode.With(err, exitcode.Config)
			}
			return nil, err
		}
	} else {
		root := opts.ResultsRoot
		if root == "" {
			root = "results"
		}
		if r.dir, err = layout.New(root, sc.Name, started); err != nil {
			return nil, err
		}
	}
	hf, err := os.Create(filepath.Join(r.dir, layout.HistoryFile))
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	defer hf.Close()
	if opts.Dir == "" {
		root := opts.ResultsRoot
		if root == "" {
			root = "results"
		}
		if err := layout.LinkLatest(root, r.dir); err != nil {
			fmt.Fprintf(opts.Log, "warning: %v\n", err)
		}
	}
	ff, err := os.Create(filepath.Join(r.dir, layout.FaultsFile))
	if err != nil {
		return nil, fmt.Errorf("create faults file: %w", err)
	}
	defer ff.Close()
	r.faults = json.NewEncoder(ff)
	r.base = monoclock.Now()
	r.m = newMerger(history.NewWriter(hf), r.base)
	if err := r.m.journal(filepath.Join(r.dir, layout.TailFile)); err != nil {
		return nil, err
	}

	info := layout.Run{Scenario: sc.Name, ScenarioFile: sc.Path, ScenarioText: string(sc.Source), Seed: r.seed,
		RunID: r.id, Started: started, BaseMono: r.base, Host: hostInfo(), Versions: versions(cases, sc.Targets != nil),
		Network: sc.Network}
	if sc.Targets != nil {
		info.Targets = sc.Targets
	}
	info.Rerun = fmt.Sprintf("bench run --seed %d %s", r.seed, sc.Path)
	if sc.Network == scenario.NetworkHosts {
		info.Rerun = fmt.Sprintf("bench run --seed %d -network hosts %s", r.seed, sc.Path)
	}
	if sc.Targets != nil {
		info.Rerun = fmt.Sprintf("bench run --seed %d -targets %s %s", r.seed, sc.Targets.Path, sc.Path)
		if sc.Compose != nil {
			info.Rerun = fmt.Sprintf("bench run --seed %d -targets %s -compose %s %s", r.seed, sc.Targets.Path, sc.Compose.File, sc.Path)
		}
	}
	r.info = &info
	if err := layout.WriteRun(r.dir, &info); err != nil {
		return nil, err
	}
	fmt.Fprintf(r.log, "run %s: seed %d, %d case(s), results in %s\n", sc.Name, r.seed, len(cases), r.dir)

	// The flusher writes merged events regularly, so a crash of the
	// harness leaves a readable history.
	stopFlush := make(chan struct{})
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopFlush:
				return
			case <-t.C:
				_ = r.m.flush(false) // errors are kept in the merger and returned below
			}
		}
	}()

	var runErr error
	r.ncases = len(cases)
	for i, c := range cases {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(r.log, "case %d/%d %s: backend %s, %d×%d clients, %s\n", i+1, len(cases), c.Name, c.BackendName,
			c.Workload.Instances, c.Workload.Clients, c.Workload.Duration)
		if c.Trials > 1 && len(c.Faults) > 0 {
			fmt.Fprintf(r.log, "  trial %s's schedule: %s\n", trialsOf(c), scheduleOf(c))
		}
		if err := r.runCase(ctx, c, i); err != nil {
			runErr = fmt.Errorf("case %s: %w", c.Name, err)
			break
		}
		if opts.OnCase != nil {
			r.caseWritten(hf, opts.OnCase)
		}
	}
	r.dropKept()
	close(stopFlush)
	<-flushDone
	if err := r.m.flush(true); err != nil && runErr == nil {
		runErr = fmt.Errorf("write history: %w", err)
	}
	if err := r.m.closeJournal(); err != nil && runErr == nil {
		runErr = err
	}
	interrupted := ctx.Err() != nil
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	info.Finished = time.Now()
	info.Interrupted = interrupted
	if err := layout.WriteRun(r.dir, &info); err != nil && runErr == nil {
		runErr = err
	}
	if err := hf.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("close history: %w", err)
	}
	out := &Outcome{Dir: r.dir, Info: info}
	if interrupted {
		// 105 says everything was torn down: only when it was.
		if len(r.teardownErrs) > 0 {
			return out, exitcode.With(fmt.Errorf("interrupted, and the teardown did not complete (the next run repairs what it can): %w", errors.Join(r.teardownErrs...)), exitcode.Harness)
		}
		return out, exitcode.With(fmt.Errorf("interrupted: %w", context.Cause(ctx)), exitcode.Interrupted)
	}
	return out, runErr
}

func selectCases(sc *scenario.Scenario, only []string) ([]*scenario.Case, error) {
	if len(only) == 0 {
		return sc.Cases, nil
	}
	var out []*scenario.Case
	for _, name := range only {
		found := false
		for _, c := range sc.Cases {
			if c.Name == name || c.Row == name {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			var names []string
			for _, c := range sc.Cases {
				names = append(names, c.Name)
			}
			return nil, fmt.Errorf("%s: no case named %q (cases: %s)", sc.Path, name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

func (r *run) caseSeed(idx int) uint64 {
	return uint64(r.seed)*1_000_003 + uint64(idx)
}

func (r *run) rng(idx int) *rand.Rand {
	return rand.New(rand.NewPCG(r.caseSeed(idx), 0xfa017))
}

// addCase records a case's link plan and start-up time in run.json.
func (r *run) addCase(ci layout.RunCase) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	r.info.Cases = append(r.info.Cases, ci)
	r.info.StartupS += ci.StartupS
}

func hostInfo() layout.Host {
	h, _ := os.Hostname() // an unknown hostname is not worth failing a run
	return layout.Host{Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(), MemoryMB: memoryMB(),
		CPUModel: procField("/proc/cpuinfo", "model name"), Kernel: strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))}
}

// procField returns the value of the first "name : value" line of a /proc
// file ("" if absent).
func procField(path, name string) string {
	for _, line := range strings.Split(readFile(path), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// readFile returns a file's text, "" if it cannot be read (what it
// describes is then unknown, not an error).
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// memoryMB reads the machine's memory from /proc/meminfo (0 if unknown).
func memoryMB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			fmt.Sscan(v, &kb)
		}
	}
	return kb / 1024
}

// versions records the servers and client libraries used.
func versions(cases []*scenario.Case, external bool) map[string]string {
	v := map[string]string{"lockbench": version.String()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			for _, want := range []string{"github.com/redis/go-redis/v9", "github.com/go-redsync/redsync/v4", "go.etcd.io/etcd/client/v3",
				"github.com/hashicorp/consul/api", "github.com/go-zookeeper/zk", "github.com/jackc/pgx/v5",
				"github.com/Shopify/toxiproxy/v2", "gonum.org/v1/plot", "github.com/HdrHistogram/hdrhistogram-go"} {
				if d.Path == want {
					v[d.Path] = d.Version
				}
			}
		}
	}
	for _, c := range cases {
		for kind, ver := range cluster.Versions(c.Servers()) {
			if external {
				ver = "not started here: the servers of the targets file"
			}
			v[kind+"-server"] = ver
		}
	}
	return v
}

// caseWritten writes out what the merger holds of the case that just ended
// and hands the history written since the last case to fn.
func (r *run) caseWritten(hf *os.File, fn func([]byte)) {
	if err := r.m.flush(false); err != nil {
		return
	}
	st, err := hf.Stat()
	if err != nil || st.Size() <= r.written {
		return
	}
	b := make([]byte, st.Size()-r.written)
	if _, err := hf.ReadAt(b, r.written); err != nil {
		return
	}
	r.written = st.Size()
	fn(b)
}

// trialsOf names the trials a case runs: "3", or "1-5" side by side.
func trialsOf(c *scenario.Case) string {
	if c.Lanes > 1 {
		return fmt.Sprintf("%d-%d", c.Trial, c.Trial+c.Lanes-1)
	}
	return fmt.Sprint(c.Trial)
}

// scheduleOf says where each of a trial's faults is scheduled and whether
// its trial's offset moved it (scenario.Fault.ScheduleNote).
func scheduleOf(c *scenario.Case) string {
	var out []string
	for _, f := range c.Faults {
		ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		out = append(out, fmt.Sprintf("%s at %s (%s)", f.Name, ms(f.At), f.ScheduleNote(ms)))
	}
	return strings.Join(out, "; ")
}
