package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/netns"
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// envBeBench makes the test binary behave as the bench command. The runner
// starts workers as its own executable with the argument "worker", so with
// this variable set in TestMain the test binary is its own worker.
const envBeBench = "LOCKBENCH_TEST_BE_BENCH"

func TestMain(m *testing.M) {
	if os.Getenv(envBeBench) == "1" {
		main() // exits
	}
	os.Setenv(envBeBench, "1")
	os.Exit(m.Run())
}

// integration marks a test that runs real servers: skipped with -short
// (make test runs the unit tests with -race and -short, then these without
// -race), and run side by side with the other integration tests. Each run
// takes an address slot of its own and, through runInProcess, a process of
// its own, so their clusters, CPU accounting and environments never meet.
func integration(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (real servers): not with -short")
	}
	t.Parallel()
}

// alone marks an integration test that must not share the machine with
// the others: it measures (a throughput gate) or is a load of its own.
// It does not call t.Parallel, and make test runs it in a stage of its own
// (ALONE_TESTS), after the others: go test runs packages side by side, so
// a test of one package is never alone while another package's run.
func alone(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (real servers): not with -short")
	}
}

func needRedis(t *testing.T) {
	t.Helper()
	integration(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (make setup installs it): %v", err)
	}
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runInProcess runs bench with args: in the test's process, or, for a
// run (which starts servers and workers and measures its own CPU), in a
// process of its own through runBench.
func runInProcess(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	if len(args) > 0 && args[0] == "run" {
		return runBench(t, nil, args...)
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

// runBench runs bench as a process of its own (this test binary, which is
// bench when envBeBench is set), with env added to the test's environment,
// and returns its output and its exit code as an error carrying it, with
// the message main printed.
func runBench(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), nil
	case !errors.As(err, &ee):
		return out.String(), errb.String(), err
	}
	msg := fmt.Sprintf("exit status %d", ee.ExitCode())
	if i := strings.LastIndex("\n"+errb.String(), "\nbench: "); i >= 0 {
		msg = strings.TrimSpace(errb.String()[i+len("bench: "):])
	}
	return out.String(), errb.String(), exitcode.With(errors.New(msg), exitcode.Code(ee.ExitCode()))
}

const controls = `
name: controls
seed: 3
workload:
  duration: 2500ms
  instances: 3
  clients: 2
  hold: {min: 1ms, max: 5ms}
  think: {min: 0ms, max: 2ms}
cases:
  - name: redis
    backend: redis
    expect: {violations: false, stale_writes_accepted: false, lost_updates: false}
  - name: local
    backend: local
    expect: {violations: true}
  - name: redis-del-slow
    backend: redis-del
    options: {drift_factor: 0.05}
    workload: {ttl: 200ms, hold: {min: 50ms, max: 400ms}, abort_on_lost: false}
    expect: {violations: true}
`

// TestControlsAgainstRealRedis is the harness's proof of power: against
// real redis-server processes the checker finds violations for the
// known-unsafe controls (local, redis-del) and none for redis without
// faults; and `bench check` on the stored history gives the same verdicts.
func TestControlsAgainstRealRedis(t *testing.T) {
	needRedis(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, controls))
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	sum := readSummary(t, dir)
	byName := map[string]verdict.CaseSummary{}
	for _, c := range sum.Cases {
		byName[c.Check.Case] = c
	}
	var p premises
	if c := byName["redis"]; c.Check.Violations != 0 || c.Check.Status != "ok" || c.Check.Resource.LostUpdates != 0 {
		t.Errorf("redis: status=%s violations=%d acquisitions=%d lost=%d", c.Check.Status, c.Check.Violations, c.Metrics.Acquisitions, c.Check.Resource.LostUpdates)
	}
	// A clean verdict is evidence as far as the case made acquisitions.
	p.acquisitions(t, byName["redis"], 50, 5*time.Millisecond)
	if c := byName["local"]; c.Check.Violations == 0 || c.Check.Resource.LostUpdates == 0 {
		t.Errorf("local: violations=%d lost=%d; the in-memory lock must let two instances in", c.Check.Violations, c.Check.Resource.LostUpdates)
	}
	if c := byName["redis-del-slow"]; c.Check.Violations == 0 || c.Check.ReleasesNotHeld+c.Metrics.Releases == 0 {
		t.Errorf("redis-del-slow: violations=%d; DEL on release must let a third client in", c.Check.Violations)
	}
	for _, f := range []string{layout.RunFile, layout.HistoryFile, layout.FaultsFile, layout.SummaryFile, layout.ReportFile, "latency.png", "latency.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || (st.Size() == 0 && f != layout.FaultsFile) {
			t.Errorf("results folder lacks %s: %v", f, err)
		}
	}
	if info, err := layout.ReadRun(dir); err != nil || info.Seed != 3 || !strings.Contains(info.Versions["redis-server"], "Redis server v=") {
		t.Errorf("run.json: %+v err=%v", info, err)
	}

	// bench check reproduces the verdict lines of the run.
	checkOut, _, err := runInProcess(t, "check", filepath.Join(dir, layout.HistoryFile))
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	runLines := strings.Split(strings.TrimSpace(stdout), "\n")
	runLines = runLines[:len(runLines)-1] // drop "results: DIR"
	if strings.TrimSpace(checkOut) != strings.Join(runLines, "\n") {
		t.Errorf("bench check differs from the run:\ncheck:\n%s\nrun:\n%s", checkOut, strings.Join(runLines, "\n"))
	}
	p.done(t)
}

func readSummary(t *testing.T, dir string) *verdict.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, layout.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var s verdict.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestExitCodes checks the documented exit codes of bad usage and input.
func TestExitCodes(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.jsonl")
	os.WriteFile(garbage, []byte("this is not a history\n"), 0o644)
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	tests := []struct {
		name string
		args []string
		code exitcode.Code
		msg  string
	}{
		{"no command", nil, exitcode.Config, "no command"},
		{"unknown command", []string{"fly"}, exitcode.Config, `unknown command "fly"`},
		{"run without file", []string{"run"}, exitcode.Config, "exactly one argument (SCENARIO.yaml)"},
		{"misspelt command", []string{"rnu"}, exitcode.Config, `did you mean "run"`},
		{"misspelt flag after the file", []string{"run", "x.yaml", "-dri", "d"}, exitcode.Config, `did you mean "dir"`},
		{"compare with one folder", []string{"compare", "a"}, exitcode.Config, "exactly 2 arguments"},
		{"compare bad noise", []string{"compare", "-noise", "lots", "a", "b"}, exitcode.Config, "percentage"},
		{"table bad view", []string{"table", "-view", "pie", "../../checker/testdata"}, exitcode.Config, ""},
		{"validate invalid", []string{"validate", writeScenario(t, "name: x\ncases: [{name: a, backend: etdc}]\n")}, exitcode.Config, "1 of 1 scenario file(s) invalid"},
		{"run missing file", []string{"run", "/nonexistent/x.yaml"}, exitcode.Config, "no such file"},
		{"run bad scenario", []string{"run", writeScenario(t, "name: x\ncases: [{name: a, backend: nope}]\n")}, exitcode.Config, `unknown backend "nope"`},
		{"run unknown case", []string{"run", "-case", "zzz", writeScenario(t, "name: x\ncases: [{name: a, backend: local}]\n")}, exitcode.Config, `no case named "zzz"`},
		{"run bad flag", []string{"run", "-nope", "x.yaml"}, exitcode.Config, "flag provided but not defined"},
		{"check garbage", []string{"check", garbage}, exitcode.Config, "garbage.jsonl:1: not a history event"},
		{"check empty", []string{"check", empty}, exitcode.Config, "no case"},
		{"check missing", []string{"check", "/nonexistent.jsonl"}, exitcode.Config, "no such file"},
		{"run bad threshold", []string{"run", writeScenario(t, "name: x\nthresholds: [\"acquire_p99 < 5\"]\ncases: [{name: a, backend: local}]\n")}, exitcode.Config, "give a unit"},
		{"threshold fails", []string{"run", "-q", "-o", t.TempDir(), writeScenario(t, "name: x\nworkload: {duration: 500ms}\nthresholds: [\"throughput > 100000000/s\", \"violations > 0\"]\ncases: [{name: a, backend: local, expect: {violations: true}}]\n")}, exitcode.Threshold, "1 threshold(s) failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runInProcess(t, tt.args...)
			if got := exitcode.Of(err); got != tt.code {
				t.Errorf("exit code %d, want %d (err %v)", got, tt.code, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v does not mention %q", err, tt.msg)
			}
		})
	}
}

// TestHelpAndVersion: -h, -help and --help print a command's usage (with
// its positional arguments) on stdout and exit 0, for every command.
func TestHelpAndVersion(t *testing.T) {
	for _, c := range commands() {
		for _, h := range []string{"-h", "--help"} {
			out, _, err := runInProcess(t, c.name, h)
			if err != nil {
				t.Errorf("bench %s %s: %v", c.name, h, err)
			}
			if !strings.Contains(out, "Usage: bench "+c.name) || !strings.Contains(out, c.args) {
				t.Errorf("bench %s %s printed:\n%s", c.name, h, out)
			}
		}
	}
	// -h after other arguments still asks for help.
	if out, _, err := runInProcess(t, "run", "x.yaml", "-h"); err != nil || !strings.Contains(out, "Flags:") {
		t.Errorf("run x.yaml -h: %v\n%s", err, out)
	}
	out, _, err := runInProcess(t, "--version")
	if err != nil || !strings.HasPrefix(out, "bench ") {
		t.Errorf("--version: %v %q", err, out)
	}
	if out, _, err := runInProcess(t, "help"); err != nil || !strings.Contains(out, "validate") {
		t.Errorf("help: %v\n%s", err, out)
	}
}

// TestFlagsAfterArguments: flags are read wherever they stand, and "--"
// ends them.
func TestFlagsAfterArguments(t *testing.T) {
	c := checkCmd()
	pos, err := c.parse([]string{"h.jsonl", "-json"}, io.Discard)
	if err != nil || len(pos) != 1 || pos[0] != "h.jsonl" || c.fs.Lookup("json").Value.String() != "true" {
		t.Errorf("check h.jsonl -json: pos %v err %v json %s", pos, err, c.fs.Lookup("json").Value)
	}
	c = reportCmd()
	pos, err = c.parse([]string{"--", "-odd-name"}, io.Discard)
	if err != nil || len(pos) != 1 || pos[0] != "-odd-name" {
		t.Errorf("report -- -odd-name: pos %v err %v", pos, err)
	}
}

// TestValidateShippedScenarios: every shipped scenario is valid, and
// bench validate prints each case's schedule without starting anything.
func TestValidateShippedScenarios(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*.yaml")
	known, _ := filepath.Glob("../../scenarios/known/*.yaml")
	usecases, _ := filepath.Glob("../../scenarios/usecases/*.yaml")
	known = append(known, usecases...)
	files = append(files, known...)
	if len(files) < 5 {
		t.Fatalf("found only %d scenario files", len(files))
	}
	out, _, err := runInProcess(t, append([]string{"validate"}, files...)...)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	if n := strings.Count(out, ": valid: "); n != len(files) {
		t.Errorf("%d files valid of %d:\n%s", n, len(files), out)
	}
	for _, want := range []string{"pause       holder (role: resolved when the fault starts)", "kill        master", "servers: etcd-1, etcd-2, etcd-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q", want)
		}
	}
	// The compose topology's scenarios, against its targets files.
	for _, c := range [][2]string{{"scenario.yaml", "targets.yaml"}, {"scenario-sentinel.yaml", "targets-sentinel.yaml"}} {
		out, _, err := runInProcess(t, "validate", "-targets", "../../compose/"+c[1], "-compose", "../../compose/docker-compose.yml", "../../compose/"+c[0])
		if err != nil || !strings.Contains(out, ": valid: ") {
			t.Errorf("compose/%s: %v\n%s", c[0], err, out)
		}
	}
	// The Kubernetes topology's, against its targets file: refused by a
	// bench built without Kubernetes, valid for one built with it.
	kube := []string{"validate", "-targets", "../../kube/targets.yaml", "../../kube/scenario.yaml"}
	if cluster.KubernetesAvailable() != nil {
		if out, _, err := runInProcess(t, kube...); exitcode.Of(err) != exitcode.Config || !strings.Contains(out, "built without Kubernetes support") {
			t.Errorf("kube/scenario.yaml in a bench without Kubernetes: %v\n%s", err, out)
		}
	}
	saved := cluster.Probe
	defer func() { cluster.Probe = saved }()
	cluster.Probe.Kubernetes = func() error { return nil }
	if out, _, err := runInProcess(t, kube...); err != nil || !strings.Contains(out, ": valid: ") {
		t.Errorf("kube/scenario.yaml: %v\n%s", err, out)
	}
}

// TestCheckTruncatedHistory: a history cut short by a crash is still
// checked; the broken last line is reported and skipped.
func TestCheckTruncatedHistory(t *testing.T) {
	src, err := os.ReadFile("../../checker/testdata/safe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "h.jsonl")
	os.WriteFile(p, append(src, []byte(`{"t":200,"type":"inv`)...), 0o644)
	out, stderr, err := runInProcess(t, "check", p)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if !strings.Contains(stderr, "truncated last line skipped") || !strings.Contains(out, "as expected") {
		t.Errorf("stdout %q stderr %q", out, stderr)
	}
}

// TestMissingRedisBinary: without redis-server the run stops before
// anything starts, saying how to install it.
func TestMissingRedisBinary(t *testing.T) {
	sc := writeScenario(t, "name: x\ncases: [{name: a, backend: redis}]\n")
	cmd := exec.Command(os.Args[0], "run", "-o", t.TempDir(), sc)
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != int(exitcode.Harness) {
		t.Fatalf("exit: %v, want code %d\n%s", err, exitcode.Harness, out)
	}
	if !strings.Contains(string(out), "apt-get install -y redis-server") {
		t.Errorf("message does not say how to install redis-server:\n%s", out)
	}
}

const longRun = `
name: long
workload: {duration: 60s, instances: 2, clients: 1}
cases:
  - name: redis
    backend: redis
    faults: [{type: pause, target: instance-1, at: 500ms, for: 50s}]
`

const longPartition = `
name: long-partition
workload: {duration: 60s, instances: 1, clients: 1}
cases:
  - name: consul
    backend: consul
    options: {session_ttl: 10s}
    faults: [{type: isolate, target: consul-2, at: 500ms, for: 50s}]
`

// longLayers makes, as root, every kind of thing a run sets up beside its
// processes: network namespaces and a bridge (network: hosts), a FUSE
// layer under the servers' data dirs (a disk-full fault in the schedule,
// never reached), and a cgroup (a CPU quota on instance 1, in force).
const longLayers = `
name: long-layers
network: hosts
workload: {duration: 60s, instances: 2, clients: 1}
cases:
  - name: redis
    backend: redis
    faults:
      - {type: cpu-starve, target: instance-1, at: 300ms, for: 50s, percent: 20}
      - {type: disk-full, target: redis-1, at: 55s, for: 1s}
`

// TestNoChildSurvives starts a run in a child bench process, stops it once
// the case is under way (one instance paused, a member isolated with
// iptables, or an instance starved in a cgroup of a run of hosts in
// namespaces over a FUSE layer), and checks that no process it started, no
// iptables chain, namespace, mount, cgroup or temp dir is left: after
// SIGINT (a clean teardown, exit code 105) and after SIGKILL of the
// harness itself (the parent-death signal takes the children along; the
// next run removes the chain, the namespaces, the layer, the cgroup and
// the data dir it left).
func TestNoChildSurvives(t *testing.T) {
	needRedis(t)
	type variant struct {
		name, scenario, fired string
		sig                   syscall.Signal
	}
	variants := []variant{
		{"pause/interrupt", longRun, "fault pause-1: pause on instance-1", syscall.SIGINT},
		{"pause/killed", longRun, "fault pause-1: pause on instance-1", syscall.SIGKILL},
	}
	if firewall.Available() == nil {
		variants = append(variants,
			variant{"iptables/interrupt", longPartition, "fault isolate-1: isolate on consul-2", syscall.SIGINT},
			variant{"iptables/killed", longPartition, "fault isolate-1: isolate on consul-2", syscall.SIGKILL})
	}
	if netns.Available() == nil && powerfs.Available() == nil && cgroup.Available("cpu") == nil {
		variants = append(variants,
			variant{"layers/interrupt", longLayers, "fault cpu-starve-1: cpu-starve on instance-1", syscall.SIGINT},
			variant{"layers/killed", longLayers, "fault cpu-starve-1: cpu-starve on instance-1", syscall.SIGKILL})
	}
	for _, v := range variants {
		sig := v.sig
		t.Run(v.name, func(t *testing.T) {
			tmp := t.TempDir()
			out := filepath.Join(tmp, "out")
			cmd := exec.Command(os.Args[0], "run", "-dir", out, writeScenario(t, v.scenario))
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			logPath := filepath.Join(tmp, "stderr.log")
			logf, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			cmd.Stderr = logf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			t.Cleanup(func() {
				// On a failed assertion, do not leave the run behind.
				cmd.Process.Kill()
				cmd.Wait()
			})
			// The history on disk waits for the paused instance (events are
			// written in time order), so watch the progress log instead.
			waitFor(t, 60*time.Second, "the fault to fire", func() bool {
				b, _ := os.ReadFile(logPath)
				return bytes.Contains(b, []byte(v.fired))
			})
			if sig == syscall.SIGKILL && strings.HasPrefix(v.name, "pause") {
				// What is asserted below needs instance 2 to have events held
				// back behind the paused instance-1 when the harness dies:
				// wait until the tail journal has some the history has not
				// (the kill could otherwise land before instance 2 acted
				// again: the journal also holds its events from before the
				// pause, already written, and instance 2 may wait a lease
				// out if instance 1 was paused holding the lock).
				waitFor(t, 10*time.Second, "instance 2's events held back in the tail journal", func() bool {
					return heldBack(filepath.Join(out, layout.HistoryFile), filepath.Join(out, layout.TailFile), "i2") > 0
				})
			}
			// What of the run's own is in place, to look for afterwards.
			slotN := -1
			if m := regexp.MustCompile(`\(slot (\d+)\)`).FindSubmatch([]byte(readFile(logPath))); m != nil {
				slotN, _ = strconv.Atoi(string(m[1]))
			}
			made := layersOf(pid, tmp, slotN)
			if strings.HasPrefix(v.name, "layers") && (len(made.namespaces) == 0 || len(made.mounts) == 0 || len(made.cgroups) == 0) {
				t.Fatalf("the run made namespaces %v, mounts %v, cgroups %v: want some of each to look for afterwards", made.namespaces, made.mounts, made.cgroups)
			}
			kids := childrenOf(pid)
			if len(kids) < 2 { // a server and a worker at least
				t.Fatalf("found %d tagged children of the run (%v), want >= 3", len(kids), kids)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			if sig == syscall.SIGINT {
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != int(exitcode.Interrupted) {
					t.Errorf("exit after SIGINT: %v, want code %d\n%s", err, exitcode.Interrupted, readFile(logPath))
				}
			}
			waitFor(t, 10*time.Second, "every child to exit", func() bool {
				for _, k := range kids {
					if alive(k) {
						return false
					}
				}
				return len(childrenOf(pid)) == 0
			})
			if sig == syscall.SIGKILL && strings.HasPrefix(v.name, "pause") {
				// The merge held instance-2's events back while instance-1
				// was paused; the tail journal keeps them for bench check.
				if n, rec := eventsAfter(t, filepath.Join(out, layout.HistoryFile), 0, "i2"); n == 0 || rec == 0 {
					t.Errorf("after SIGKILL: %d events of instance 2 (%d recovered from the tail journal); want both above 0", n, rec)
				}
			}
			if sig == syscall.SIGKILL {
				// The killed harness could not remove its data dir (nor its
				// layer, cgroup or namespaces); the next run removes them
				// when it starts, whatever slot and mode it runs in.
				again := exec.Command(os.Args[0], "run", "-q", "-dir", filepath.Join(tmp, "again"),
					writeScenario(t, "name: again\nworkload: {duration: 300ms, instances: 1, clients: 1}\ncases: [{name: a, backend: local, expect: {violations: false}}]\n"))
				again.Env = append(os.Environ(), "TMPDIR="+tmp)
				if out, err := again.CombinedOutput(); err != nil {
					t.Fatalf("second run: %v\n%s", err, out)
				}
			}
			left, _ := filepath.Glob(filepath.Join(tmp, "lockbench-*"))
			if len(left) > 0 {
				t.Errorf("temp dirs left behind: %v", left)
			}
			if rules, err := exec.Command("iptables", "-w", "-S").Output(); err == nil && bytes.Contains(rules, []byte(fmt.Sprintf("%s%d", firewall.ChainPrefix, pid))) {
				t.Errorf("iptables chain of run %d left behind:\n%s", pid, rules)
			}
			if left := layersOf(pid, tmp, slotN); len(left.namespaces)+len(left.mounts)+len(left.cgroups) > 0 {
				t.Errorf("left behind: namespaces %v, mounts %v, cgroups %v", left.namespaces, left.mounts, left.cgroups)
			}
		})
	}
}

// runLayers is what of a run's own, beside processes, exists now.
type runLayers struct{ namespaces, mounts, cgroups []string }

// layersOf lists the namespaces of slot n (lb<n>-…, when n >= 0), the
// mounts under the run's temp dir tmp (its data dir's FUSE layer) and
// the cgroups of harness pid (cgroup.Prefix<pid>-…, in any controller).
func layersOf(pid int, tmp string, n int) runLayers {
	var l runLayers
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil && n >= 0 {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], fmt.Sprintf("lb%d-", n)) {
				l.namespaces = append(l.namespaces, f[0])
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], tmp+"/") {
				l.mounts = append(l.mounts, f[4])
			}
		}
	}
	l.cgroups, _ = filepath.Glob(filepath.Join(cgroup.Root, "*", fmt.Sprintf("%s%d-*", cgroup.Prefix, pid)))
	return l
}

// heldBack counts the events of proc (a prefix: "i2") that the tail journal
// holds and the history at path does not have yet; 0 when either cannot
// be read now.
func heldBack(path, tailPath, proc string) int {
	f, n, err := history.OpenRecovered(path, tailPath)
	if err != nil || n == 0 {
		return 0
	}
	defer f.Close()
	var evs []history.Event
	r := history.NewReader(f, path)
	for r.Next() {
		evs = append(evs, *r.Event())
	}
	count := 0
	for _, e := range evs[max(0, len(evs)-n):] {
		if strings.HasPrefix(e.Proc, proc) {
			count++
		}
	}
	return count
}

// alive reports whether process p exists and is not a zombie.
func alive(p int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
	return err == nil && !bytes.Contains(stat, []byte(") Z "))
}

// childrenOf lists the live processes of bench process pid: its direct
// children, and any process tagged with its run id (which ends with
// "-<pid>"; redis-server overwrites its environment, so the parent link
// finds it). Zombies are not counted.
func childrenOf(pid int) []int {
	var out []int
	suffix := []byte("-" + strconv.Itoa(pid) + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if !alive(p) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// Fields after the ")" of the command: state, ppid, ...
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(pid) {
				out = append(out, p)
				continue
			}
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		i := bytes.Index(env, []byte(procgroup.EnvRunID+"="))
		if i < 0 {
			continue
		}
		rest := env[i:]
		if j := bytes.IndexByte(rest, 0); j >= 0 && bytes.HasSuffix(rest[:j+1], suffix) {
			out = append(out, p)
		}
	}
	return out
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
