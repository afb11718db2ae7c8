package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/hunt"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/realized"
	"github.com/lockbench/lockbench/internal/runner"
	"github.com/lockbench/lockbench/internal/scenario"
)

// huntWorkload is a hunt's workload unless -workload changes it: two
// instances of one client a trial on one key (the least that can show two
// holders), holds long enough for a pause to land inside one, a lease of
// 2 s (etcd's least), and a paused holder that resumes and writes, so the
// resource shows the damage.
const huntWorkload = `{instances: 2, clients: 1, keys: {count: 1}, hold: {min: 20ms, max: 60ms}, think: {min: 0ms, max: 5ms}, ttl: 2s, acquire_timeout: 3s, retry: {attempts: 200, base: 2ms, max: 50ms, jitter: 0.5}, abort_on_lost: false}`

func huntCmd() *command {
	c := newCommand("hunt", "BACKEND", "search a lock for a failure, confirm it by replays and shrink it", 1, 1)
	c.long = `Draws trials from a seed over a fault space (the kinds this deployment
mode runs against this backend, targets by role, windows in multiples of
the lease, overlapping or following faults), runs them side by side in
batches within a budget, and keeps a coverage table (fault kind × the
lock's phase when the fault began × window). It stops at the first
safety violation (two holders, or a late write that landed), or with
-liveness also at a lock that never came back. A failure counts only if
it recurs in -k of -n replays of its realized schedule; it is then
shrunk (fewer faults, shorter windows, fewer instances and clients, a
shorter case), each step kept only while it still recurs, and the
smallest schedule is written as shrunk.yaml with its expectation. When
the budget runs out with nothing found it says what was searched and
what that bounds, never "safe". Everything is written to a folder under
-o: one results folder per run, hunt.md, hunt.json, shrunk.yaml.
Exit code: 100 for a confirmed safety violation, 103 for a lock that
never came back, 0 when nothing recurred.`
	out := c.fs.String("o", envOr("RESULTS_DIR", "results"), "folder under which the hunt's folder is created (env RESULTS_DIR)")
	options := c.fs.String("options", "", "the backend's options, as YAML flow ({session_ttl: 10s}); default: the backend's defaults")
	wl := c.fs.String("workload", "", "workload fields over the hunt's own ("+huntWorkload+"), as YAML flow")
	liveness := c.fs.Bool("liveness", false, "stop at a lock that never came back too, not only at a safety violation")
	budget := c.fs.Duration("budget", 10*time.Minute, "time for the search (batches are not started past it)")
	trials := c.fs.Int("trials", 0, "stop after this many trials (0: the time budget alone)")
	shrinkBudget := c.fs.Duration("shrink-budget", 10*time.Minute, "time for shrinking a confirmed failure")
	batch := c.fs.Int("batch", 10, "trials side by side in one run")
	n := c.fs.Int("n", 10, "replays of a failure's schedule")
	k := c.fs.Int("k", 8, "replays that must show the failure again for it to count, and for a shrinking step to be kept")
	seed := c.fs.Int64("seed", 1, "the seed every draw derives from")
	kinds := c.fs.String("kinds", "pause:4,kill:2,cpu-starve:2,isolate:2", "fault kinds with weights (kind:weight,...); those this backend and mode cannot run are left out")
	tgts := c.fs.String("targets", "holder:5,a-waiter:2,instance-1:2,instance-2:1", "targets with weights, within a trial")
	windows := c.fs.String("windows", "0.25,0.5,1,2,4", "fault windows, in multiples of the lease")
	maxFaults := c.fs.Int("max-faults", 2, "faults a trial has at most")
	verify := c.fs.Bool("verify", true, "run the written scenario once more at the end")
	network := c.fs.String("network", "", "loopback (default) or hosts")
	stop := c.fs.String("stop", "", "the safety violation to stop at: unsafe (two holders, or a late write that landed) or damage (a late write only); default damage for a lock whose work is in its own store (etcd-txn, postgres-for-update, postgres-occ), unsafe for the others")
	c.exec = func(ctx context.Context, cio cmdIO, args []string) error {
		cfg, err := huntConfig(args[0], *options, *wl, *network, *kinds, *tgts, *windows, cio.stderr)
		if err != nil {
			return err
		}
		cfg.Seed, cfg.Budget, cfg.MaxTrials, cfg.ShrinkBudget = *seed, *budget, *trials, *shrinkBudget
		cfg.Batch, cfg.Replays, cfg.Need, cfg.Liveness, cfg.Verify, cfg.Log = *batch, *n, *k, *liveness, *verify, cio.stdout
		cfg.Space.MaxFaults = *maxFaults
		switch *stop {
		case "unsafe":
			cfg.DamageOnly = false
		case "damage":
			cfg.DamageOnly = true
		case "":
		default:
			return exitcode.With(fmt.Errorf("-stop %q: want unsafe or damage", *stop), exitcode.Config)
		}
		if err := cfg.Space.Validate(); err != nil {
			return exitcode.With(err, exitcode.Config)
		}
		if *n < 1 || *k < 1 || *k > *n || *batch < 1 || *batch > scenario.MaxLanes || *n > scenario.MaxLanes {
			return exitcode.With(fmt.Errorf("-batch %d, -n %d, -k %d: want 1 ≤ k ≤ n, and batch and n at most %d (trials side by side)", *batch, *n, *k, scenario.MaxLanes), exitcode.Config)
		}
		dir, err := layout.New(*out, "hunt-"+args[0], time.Now())
		if err != nil {
			return fmt.Errorf("hunt folder: %w", err)
		}
		what := "two holders or a late write"
		if cfg.DamageOnly {
			what = "a late write that landed"
		}
		if cfg.Liveness {
			what += ", or a lock that never came back"
		}
		fmt.Fprintf(cio.stdout, "hunt %s: seed %d, budget %s, %d trials side by side, stopping at %s that recurs in %d of %d replays; lease %s; in %s\n",
			args[0], cfg.Seed, cfg.Budget, cfg.Batch, what, cfg.Need, cfg.Replays, cfg.Space.Lease, dir)
		res, herr := hunt.Hunt(ctx, cfg, &benchRunner{root: dir, network: *network})
		if res == nil {
			return exitcode.With(herr, exitcode.Config)
		}
		if werr := writeHunt(dir, cfg, res); werr != nil && herr == nil {
			herr = werr
		}
		for _, l := range res.Summary(cfg) {
			fmt.Fprintln(cio.stdout, l)
		}
		fmt.Fprintf(cio.stdout, "hunt: %s\n", filepath.Join(dir, "hunt.md"))
		if herr != nil {
			return herr
		}
		switch {
		case res.Finding == nil:
			return nil
		case res.Finding.Class == realized.ClassNeverBack:
			return exitcode.With(errors.New("a lock that never came back, confirmed by replays"), exitcode.Unavailable)
		}
		return exitcode.With(fmt.Errorf("%s, confirmed by replays", res.Finding.Class), exitcode.Violation)
	}
	return c
}

// huntConfig builds the hunt's template and fault space: a probe case
// says the lease and validates the backend, its options and workload,
// and each fault kind (those this backend and mode refuse are left out,
// saying why).
func huntConfig(backend, options, wl, network, kinds, tgts, windows string, log io.Writer) (hunt.Config, error) {
	var cfg hunt.Config
	cfg.Backend = backend
	cs := fmt.Sprintf("{name: probe, backend: %q", backend)
	if options != "" {
		cs += ", options: " + options
	}
	if wl != "" {
		cs += ", workload: " + wl
	}
	probe := func(faults string) (*scenario.Scenario, error) {
		src := fmt.Sprintf("name: hunt\nseed: 1\nworkload: %s\ncases:\n  - %s%s}\n", huntWorkload, cs, faults)
		return scenario.ParseWith("hunt", []byte(src), scenario.Options{Network: network})
	}
	sc, err := probe("")
	if err != nil {
		return cfg, exitcode.With(err, exitcode.Config)
	}
	c := sc.Cases[0]
	cfg.Template = hunt.Template{Top: sc.Doc, Case: c.Source}
	_, store := c.Backend.(backends.Verifier)
	cfg.DamageOnly = store || backends.IsLockless(c.Backend)
	cfg.Base = hunt.Schedule{Instances: c.Workload.Instances, Clients: c.Workload.Clients}
	lease := backends.LeaseTime(c.Backend, c.Workload.TTL.D())
	if lease <= 0 {
		lease = c.Workload.TTL.D()
	}
	cfg.Space = hunt.Space{Lease: lease, Warmup: 500 * time.Millisecond, Windows: nil}
	if cfg.Space.Windows, err = parseFloats(windows); err != nil {
		return cfg, exitcode.With(fmt.Errorf("-windows: %w", err), exitcode.Config)
	}
	if cfg.Space.Targets, err = parseWeights(tgts); err != nil {
		return cfg, exitcode.With(fmt.Errorf("-targets: %w", err), exitcode.Config)
	}
	ks, err := parseWeights(kinds)
	if err != nil {
		return cfg, exitcode.With(fmt.Errorf("-kinds: %w", err), exitcode.Config)
	}
	cuts := map[string]bool{"isolate": true, "loss": true, "split": true, "one-way": true}
kinds:
	for _, kw := range ks {
		if cuts[kw.Value] && len(c.Backend.Servers()) == 0 {
			fmt.Fprintf(log, "left out of the space: %s: %s has no server to cut an instance from\n", kw.Value, backend)
			continue
		}
		for _, t := range cfg.Space.Targets {
			if _, err := probe(fmt.Sprintf(", faults: [{type: %s, target: %s, at: 1s, for: 1s}], trials: {count: 2, side_by_side: 2}", kw.Value, t.Value)); err != nil {
				msg, _, _ := strings.Cut(err.Error(), "\n")
				fmt.Fprintf(log, "left out of the space: %s on %s: %s\n", kw.Value, t.Value, msg)
				continue kinds
			}
		}
		cfg.Space.Kinds = append(cfg.Space.Kinds, kw)
	}
	if len(cfg.Space.Kinds) == 0 {
		return cfg, exitcode.With(fmt.Errorf("-kinds %s: none of them runs against %s here", kinds, backend), exitcode.Config)
	}
	return cfg, nil
}

// parseWeights reads "a:3,b,c:1" (a missing weight is 1).
func parseWeights(s string) ([]hunt.Weighted, error) {
	var out []hunt.Weighted
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, w, ok := strings.Cut(part, ":")
		n := 1
		if ok {
			var err error
			if n, err = strconv.Atoi(w); err != nil || n < 1 {
				return nil, fmt.Errorf("%q: the weight must be a whole number ≥ 1", part)
			}
		}
		out = append(out, hunt.Weighted{Value: v, Weight: n})
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", part)
		}
		out = append(out, f)
	}
	return out, nil
}

// writeHunt writes hunt.md, hunt.json and shrunk.yaml into the hunt's
// folder.
func writeHunt(dir string, cfg hunt.Config, res *hunt.Result) error {
	if err := os.WriteFile(filepath.Join(dir, "hunt.md"), []byte(res.Markdown(cfg)), 0o644); err != nil {
		return fmt.Errorf("write hunt.md: %w", err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode hunt.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hunt.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write hunt.json: %w", err)
	}
	if res.Written != "" {
		if err := os.WriteFile(filepath.Join(dir, "shrunk.yaml"), []byte(res.Written), 0o644); err != nil {
			return fmt.Errorf("write shrunk.yaml: %w", err)
		}
	}
	return nil
}

// benchRunner runs a hunt's or a replay's scenarios for real: each into
// a results folder of its own under root, checked and with its realized
// schedules.
type benchRunner struct {
	root, network string
}

func (b *benchRunner) Run(ctx context.Context, name string, src []byte) (*realized.Run, string, error) {
	path := filepath.Join(b.root, name+".yaml")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		return nil, "", fmt.Errorf("write %s: %w", path, err)
	}
	sc, err := scenario.ParseWith(path, src, scenario.Options{Network: b.network})
	if err != nil {
		return nil, "", exitcode.With(err, exitcode.Config)
	}
	dir := filepath.Join(b.root, name)
	outcome, err := runner.Run(ctx, sc, runner.Options{Dir: dir, Log: io.Discard})
	if outcome == nil {
		return nil, dir, err
	}
	if err != nil && ctx.Err() != nil {
		return nil, dir, err
	}
	sum, aerr := analyseRun(outcome.Dir)
	if sum == nil {
		return nil, dir, aerr
	}
	r, rerr := realized.Read(outcome.Dir)
	if rerr != nil {
		return nil, dir, fmt.Errorf("realized schedules of %s: %w", outcome.Dir, rerr)
	}
	return r, outcome.Dir, nil
}
