package runner

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/wait"
)

func srv(name string) faults.Target { return faults.ServerTarget(name) }

// TestEnvActsOnServersThroughTheCluster: a server's signal, kill,
// restart and state go to its deployment, by name.
func TestEnvActsOnServersThroughTheCluster(t *testing.T) {
	fc := newFakeCluster("redis-1")
	tc := newTestCase(t, fc)
	env := &faultEnv{cr: tc.caseRun, fault: "f"}
	if err := env.Signal(srv("redis-1"), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if st, err := env.Stopped(srv("redis-1")); !st || err != nil {
		t.Errorf("stopped: %v, %v", st, err)
	}
	before := time.Now()
	if err := env.Kill(srv("redis-1")); err != nil {
		t.Fatal(err)
	}
	// A heal that finds the server gone asks which fault of the case
	// killed it, and since when (MODEL §10: only a kill inside its window
	// ended it).
	if by := env.KilledBy(srv("redis-1"), before); by != "f" {
		t.Errorf("killed by %q, want f", by)
	}
	if by := env.KilledBy(srv("redis-1"), time.Now()); by != "" {
		t.Errorf("a kill before the window counted: %q", by)
	}
	if by := env.KilledBy(srv("redis-2"), before); by != "" {
		t.Errorf("a server nobody killed was killed by %q", by)
	}
	if err := env.healthy(srv("redis-1")); err == nil {
		t.Error("a killed server is healthy")
	}
	if err := env.Restart(context.Background(), srv("redis-1")); err != nil {
		t.Fatal(err)
	}
	if got := fc.called(); got != "signal redis-1 19\nkill redis-1\nrestart redis-1" {
		t.Errorf("calls:\n%s", got)
	}
	if addr, kind, err := env.Server(srv("redis-1")); addr != "127.9.0.10:7000" || kind.Name != "redis" || kind.Clock != faults.ClockData || err != nil {
		t.Errorf("server: %s %+v %v", addr, kind, err)
	}
	for _, bad := range []faults.Target{srv("redis-9"), faults.InstanceTarget(1)} {
		if _, _, err := env.Server(bad); err == nil {
			t.Errorf("%s is a server", bad)
		}
		if err := env.Signal(bad, syscall.SIGSTOP); err == nil {
			t.Errorf("%s was signalled", bad)
		}
	}
	fc.leader = "redis-1"
	if l, err := env.Leader(context.Background()); l != "redis-1" || err != nil {
		t.Errorf("leader: %s, %v", l, err)
	}
}

// TestEnvActsOnInstancesDirectly: an instance's process group is
// signalled and killed here, and a kill says which fault did it.
func TestEnvActsOnInstancesDirectly(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	w := tc.worker(t, 2, "redis-1")
	env := &faultEnv{cr: tc.caseRun, fault: "kill-2"}
	inst := faults.InstanceTarget(2)
	if err := env.Signal(inst, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped, err := wait.Until(context.Background(), 5*time.Millisecond, 2*time.Second, func() (bool, error) { return env.Stopped(inst) })
	if !stopped || err != nil {
		t.Errorf("stopped: %v, %v", stopped, err)
	}
	if err := env.Signal(inst, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := env.healthy(inst); err != nil {
		t.Error(err)
	}
	if err := env.Kill(inst); err != nil {
		t.Fatal(err)
	}
	if w.killedBy != "kill-2" || w.proc.Alive() {
		t.Errorf("killed by %q, alive %v", w.killedBy, w.proc.Alive())
	}
	if err := env.healthy(inst); err == nil {
		t.Error("a killed instance is healthy")
	}
	// A pause's resume of an instance a kill ended finds nothing to
	// signal, and says so in a way the fault can tell from a failure.
	if err := env.Signal(inst, syscall.SIGCONT); !errors.Is(err, faults.ErrGone) {
		t.Errorf("signal to a killed instance: %v, want faults.ErrGone", err)
	}
	if tc.fc.called() != "" {
		t.Errorf("an instance's fault went to the cluster: %s", tc.fc.called())
	}
}

// TestEnvPeers: a server's peers are the other servers; an instance's,
// the servers its clients dial.
func TestEnvPeers(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("etcd-1", "etcd-2", "etcd-3"))
	tc.worker(t, 1, "etcd-3")
	env := &faultEnv{cr: tc.caseRun}
	if got := faults.Targets(env.Peers(srv("etcd-2"))); got != "etcd-1,etcd-3" {
		t.Errorf("etcd-2's peers: %s", got)
	}
	if got := faults.Targets(env.Peers(faults.InstanceTarget(1))); got != "etcd-3" {
		t.Errorf("instance-1's peers: %s", got)
	}
}

// TestEnvCuts: between servers a cut is by their addresses; between an
// instance and a server by the address the instance really dials (the
// server, or its proxy's port); one protocol only drops a proxy's port
// for UDP; a loss passes its share.
func TestEnvCuts(t *testing.T) {
	fc := newFakeCluster("etcd-1", "etcd-2")
	tc := newTestCase(t, fc)
	w := tc.worker(t, 1, "etcd-1", "etcd-2")
	w.routes[1].Via = "127.9.0.1:6000" // etcd-2 through a proxy
	env := &faultEnv{cr: tc.caseRun}
	inst := faults.InstanceTarget(1)
	steps := []func() (faults.Cut, error){
		func() (faults.Cut, error) { return env.Cut(srv("etcd-1"), srv("etcd-2")) },
		func() (faults.Cut, error) { return env.Cut(inst, srv("etcd-1")) },
		func() (faults.Cut, error) { return env.Cut(srv("etcd-2"), inst) },
		func() (faults.Cut, error) { return env.CutProto(inst, srv("etcd-2"), "udp") },
		func() (faults.Cut, error) { return env.CutProto(inst, srv("etcd-2"), "tcp") },
		func() (faults.Cut, error) { return env.Lose(srv("etcd-1"), srv("etcd-2"), 0.3) },
	}
	for _, step := range steps {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := strings.Join([]string{
		"drop 127.9.0.10 127.9.0.11   1",
		"drop 127.9.1.1 127.9.0.10   1",
		"drop 127.9.0.1:6000 127.9.1.1   1",
		"drop 127.9.1.1 127.9.0.1  udp 1",
		"drop 127.9.1.1 127.9.0.1:6000  tcp 1",
		"drop 127.9.0.10 127.9.0.11   0.3",
	}, "\n")
	if got := fc.called(); got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
	if _, err := env.Cut(inst, srv("etcd-9")); err == nil || !strings.Contains(err.Error(), "instance-1 has no route to etcd-9") {
		t.Errorf("a server the instance does not dial: %v", err)
	}
	if _, err := env.Cut(faults.InstanceTarget(5), srv("etcd-1")); err == nil {
		t.Error("an instance that does not exist was cut")
	}
}

// TestEnvAbilitiesOfTheDeployment: netem, cgroups, clocks, disks go to
// the deployment when it has them, and are refused when it does not.
func TestEnvAbilitiesOfTheDeployment(t *testing.T) {
	fc := newFakeCluster("postgres-1", "postgres-2")
	tc := newTestCase(t, fc)
	env := &faultEnv{cr: tc.caseRun}
	pg := srv("postgres-1")
	refusals := []error{}
	_, err := env.Shape(pg, nil, faults.Netem{})
	refusals = append(refusals, err, env.JumpClock(pg, time.Second), env.DriftClock(pg, 2))
	_, err = env.Confine(pg, "cpu", nil)
	refusals = append(refusals, err)
	_, err = env.DataDevice(pg)
	refusals = append(refusals, err)
	_, err = env.DiskFull(pg, true)
	refusals = append(refusals, err)
	_, err = env.DiskRefused(pg)
	refusals = append(refusals, err)
	_, _, err = env.PowerLoss(pg)
	refusals = append(refusals, err)
	for i, err := range refusals {
		if err == nil {
			t.Errorf("ability %d of a deployment that lacks it succeeded", i)
		}
	}

	tc.acts = fullCluster{fc}
	if _, err := env.Shape(pg, []faults.Target{srv("postgres-2")}, faults.Netem{Delay: time.Millisecond, Loss: 5}); err != nil {
		t.Fatal(err)
	}
	if err := env.JumpClock(pg, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := env.DriftClock(pg, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Confine(pg, "cpu", [][2]string{{"cpu.cfs_quota_us", "1000"}}); err != nil {
		t.Fatal(err)
	}
	if dev, err := env.DataDevice(pg); dev != "8:1" || err != nil {
		t.Errorf("device %s, %v", dev, err)
	}
	if n, err := env.DiskFull(pg, true); n != 7 || err != nil {
		t.Errorf("disk full: %d, %v", n, err)
	}
	if n, err := env.DiskRefused(pg); n != 3 || err != nil {
		t.Errorf("refused: %d, %v", n, err)
	}
	if b, f, err := env.PowerLoss(pg); b != 10 || f != 2 || err != nil {
		t.Errorf("power loss: %d %d %v", b, f, err)
	}
	want := "shape 127.9.0.10 to [127.9.0.11] delay 1ms jitter 0s loss 5\njump postgres-1 1s\ndrift postgres-1 2\nconfine postgres-1 cpu [[cpu.cfs_quota_us 1000]]\ndevice postgres-1\ndisk-full postgres-1 true\nrefused postgres-1\npower-loss postgres-1"
	if got := fc.called(); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	if _, err := env.Shape(pg, []faults.Target{srv("nope")}, faults.Netem{}); err == nil {
		t.Error("netem to a server that does not exist")
	}
}

// TestEnvLinksAndTraffic: a link's proxy is the deployment's, by its
// proxy name; its traffic is the relay's for a server-side link, else
// the sum of the reports of the instances it carries.
func TestEnvLinksAndTraffic(t *testing.T) {
	fc := newFakeCluster("redis-1")
	fc.proxies["redis-1@instance-2"] = true
	fc.relays["redis-1-repl"] = links.Counts{Dials: 9}
	tc := newTestCase(t, fc)
	env := &faultEnv{cr: tc.caseRun}
	if p, err := env.Link(faults.LinkTarget("redis-1", 2)); err != nil || p.Name != "redis-1@instance-2" {
		t.Errorf("link: %+v, %v", p, err)
	}
	if _, err := env.Link(faults.LinkTarget("redis-1", 0)); err == nil {
		t.Error("a link with no proxy has one")
	}
	ctx := context.Background()
	if c, err := env.Traffic(ctx, faults.LinkTarget("redis-1-repl", 0)); err != nil || c.Dials != 9 {
		t.Errorf("relay: %+v, %v", c, err)
	}
	for n := range 3 {
		w := tc.worker(t, tc.instance(n+1), "redis-1")
		w.report.Links = links.Snapshot{"redis-1": {Dials: int64(n + 1)}}
		w.reportT = 1 << 62 // reported after any call
	}
	if c, err := env.Traffic(ctx, faults.LinkTarget("redis-1", 0)); err != nil || c.Dials != 6 {
		t.Errorf("every instance's: %+v, %v", c, err)
	}
	if c, err := env.Traffic(ctx, faults.LinkTarget("redis-1", 2)); err != nil || c.Dials != 2 {
		t.Errorf("instance 2's: %+v, %v", c, err)
	}
	// An instance that has not reported since is waited for, a second at
	// most: its last report counts.
	tc.workers[3].reportT = 0
	start := time.Now()
	if c, err := env.Traffic(ctx, faults.LinkTarget("redis-1", 0)); err != nil || c.Dials != 6 || time.Since(start) < time.Second {
		t.Errorf("a stale report: %+v, %v after %s", c, err, time.Since(start))
	}
}

// TestEnvConnectedMemberAndPlays: the optional abilities the runner
// gives the faults answer from the case.
func TestEnvConnectedMemberAndPlays(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("zk-1"))
	tc.worker(t, 1, "zk-1")
	env := &faultEnv{cr: tc.caseRun}
	if _, err := env.ConnectedMember(faults.InstanceTarget(1)); err == nil || !strings.Contains(err.Error(), "no connection to any member now") {
		t.Errorf("a member of an instance connected to none: %v", err)
	}
	holder := faults.InstanceTarget(1)
	holder.From = faults.RoleHolder
	if env.Plays(holder) {
		t.Error("an instance with no client inside holds")
	}
	var _ faults.RoleKeeper = env
	var _ faults.MemberFinder = env
	var _ faults.Lossy = env
	var _ faults.ProtoCutter = env
	var _ faults.Shaper = env
	var _ faults.PostgresAdmin = env
}
