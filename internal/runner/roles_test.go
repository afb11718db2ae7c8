package runner

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/workload"
)

func role(s string) faults.Target { return faults.ParseTarget(s) }

// TestResolveServerRoles: leader and master are the server the cluster
// names now; a follower a live member of the leader's kind that is not
// it; each remembers the role it came from.
func TestResolveServerRoles(t *testing.T) {
	fc := newFakeCluster("etcd-1", "etcd-2", "etcd-3", "redis-1")
	fc.leader = "etcd-2"
	fc.servers["etcd-3"].Alive = false
	tc := newTestCase(t, fc)
	ctx := context.Background()
	for _, r := range []string{"leader", "master"} {
		got, err := tc.resolveRole(ctx, role(r), 0, 0)
		if err != nil || got.Name != "etcd-2" || got.Kind != faults.Server || got.From != r {
			t.Errorf("%s: %+v, %v", r, got, err)
		}
	}
	for choice := range uint64(4) {
		got, err := tc.resolveRole(ctx, role("follower"), 0, choice)
		if err != nil || got.Name != "etcd-1" || got.From != "follower" {
			t.Errorf("follower (choice %d): %+v, %v; etcd-3 is dead, redis-1 of another kind", choice, got, err)
		}
	}
}

// TestResolveInstanceRoles: the holder is an instance with a client
// inside its critical section (in the store here), holder-of:<key> one on
// that key, a-waiter one with an acquire in flight; a dead instance is
// never picked, and choice picks among the others in name order.
func TestResolveInstanceRoles(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	for n := history.Instance(1); n <= 3; n++ {
		tc.worker(t, n, "redis-1")
	}
	tc.storing["i1c0"] = "k0"
	tc.storing["i3c1"] = "k5"
	tc.waiting["i2c0"] = true
	ctx := context.Background()
	pick := func(r string, choice uint64) string {
		t.Helper()
		got, err := tc.resolveRole(ctx, role(r), 0, choice)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if got.Kind != faults.Instance || got.From != r || got.Name != got.Instance.String() {
			t.Errorf("%s resolved to %+v", r, got)
		}
		return got.Name
	}
	if a, b := pick("holder", 0), pick("holder", 1); a != "instance-1" || b != "instance-3" {
		t.Errorf("holder: %s, %s", a, b)
	}
	if got := pick("holder-of:k5", 0); got != "instance-3" {
		t.Errorf("holder-of:k5: %s", got)
	}
	if got := pick("a-waiter", 7); got != "instance-2" {
		t.Errorf("a-waiter: %s", got)
	}
	tc.workers[1].proc.Kill(5 * time.Second)
	if got := pick("holder", 0); got != "instance-3" {
		t.Errorf("holder with instance 1 dead: %s", got)
	}
}

// TestResolveWithinALane: a fault of a side-by-side trial picks among its
// lane's instances only.
func TestResolveWithinALane(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	tc.c.Lanes, tc.c.LaneInstances = 2, 2
	for n := history.Instance(1); n <= 4; n++ {
		tc.worker(t, n, "redis-1")
	}
	tc.storing["i1c0"] = "k0"
	tc.storing["i4c0"] = "k1"
	for lane, want := range map[int]string{1: "instance-1", 2: "instance-4"} {
		got, err := tc.resolveRole(context.Background(), role("holder"), lane, 0)
		if err != nil || got.Name != want {
			t.Errorf("lane %d: %+v, %v", lane, got, err)
		}
	}
	for n, lane := range map[history.Instance]int{1: 1, 2: 1, 3: 2, 4: 2, 0: 0} {
		if got := tc.laneOf(n); got != lane {
			t.Errorf("laneOf(%d) = %d, want %d", n, got, lane)
		}
	}
	for n, trial := range map[history.Instance]int{1: 1, 2: 2, 3: 1, 4: 2} {
		if got := tc.trialInstance(n); got != trial {
			t.Errorf("trialInstance(%d) = %d, want %d", n, got, trial)
		}
	}
	tc.c.Lanes = 1
	if tc.laneOf(3) != 0 || tc.trialInstance(3) != 3 {
		t.Error("outside side-by-side trials there are no lanes")
	}
}

// TestResolveWaitsThenGivesUp: a role nobody plays yet is waited for,
// and the wait ends with the case.
func TestResolveWaitsThenGivesUp(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	tc.worker(t, 1, "redis-1")
	go func() {
		time.Sleep(30 * time.Millisecond)
		tc.liveMu.Lock()
		tc.storing["i1c0"] = "k0"
		tc.liveMu.Unlock()
	}()
	got, err := tc.resolveRole(context.Background(), role("holder"), 0, 0)
	if err != nil || got.Name != "instance-1" {
		t.Errorf("a holder that came late: %+v, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := tc.resolveRole(ctx, role("leader"), 0, 0); err == nil || !strings.Contains(err.Error(), "could not be resolved before the case ended") {
		t.Errorf("no leader ever: %v", err)
	}
}

// TestResolveScope: links scoped to an instance role are resolved once,
// all to the same instance.
func TestResolveScope(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("etcd-1", "etcd-2"))
	tc.worker(t, 1, "etcd-1", "etcd-2")
	tc.worker(t, 2, "etcd-1", "etcd-2")
	tc.storing["i2c0"] = "k0"
	f := fault("drop", &scripted{}, "link:etcd-1@holder", "link:etcd-2@holder")
	got, err := tc.resolve(context.Background(), f, 0)
	if err != nil || faults.Targets(got) != "link:etcd-1@instance-2,link:etcd-2@instance-2" {
		t.Fatalf("resolved %v, %v", got, err)
	}
	if got[0].From != "holder" || got[1].Instance != 2 {
		t.Errorf("%+v", got)
	}
	named := fault("drop", &scripted{}, "link:etcd-1@instance-1")
	if got, _ := tc.resolve(context.Background(), named, 0); len(got) != 1 || got[0] != named.Targets[0] {
		t.Errorf("a named target is itself: %+v", got)
	}
}

// TestPlays: a target resolved from a holder role plays it while a
// client of its instance is inside its critical section; any other
// target always does.
func TestPlays(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	holder := faults.InstanceTarget(1)
	holder.From = faults.RoleHolder
	keyed := faults.InstanceTarget(1)
	keyed.From = faults.RoleHolderOf + "k1"
	if tc.plays(holder) || tc.plays(keyed) {
		t.Error("an instance with no client inside plays the holder")
	}
	tc.storing["i1c3"] = "k0"
	if !tc.plays(holder) || tc.plays(keyed) {
		t.Error("instance 1 holds k0: it is the holder, not holder-of:k1")
	}
	for _, other := range []faults.Target{faults.InstanceTarget(2), {Kind: faults.Server, Name: "redis-1", From: "leader"}} {
		if !tc.plays(other) {
			t.Errorf("%+v does not play its role", other)
		}
	}
}

// TestConnectedMember: the member an instance's clients are connected to
// is read from the kernel's list of its process's connections, matched to
// its routes (here: this test's own process, with one connection to a
// listener standing for a server).
func TestConnectedMember(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	tc := newTestCase(t, newFakeCluster("zk-1", "zk-2"))
	w := tc.worker(t, 1)
	if m, err := tc.connectedMember(1); m != "" || err != nil {
		t.Errorf("a sleeping process is connected to %q (%v)", m, err)
	}
	// An instance whose process holds one connection, to the listener.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, err := procgroup.StartProcess("instance-1", "runner-test", exec.Command("bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+"; sleep 60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(5 * time.Second) })
	w.proc = p
	w.routes = []links.Route{{Name: "zk-2", Addr: ln.Addr().String()}, {Name: "zk-1", Addr: "127.0.0.1:1"}}
	var m string
	for deadline := time.Now().Add(time.Minute); m == "" && err == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m, err = tc.connectedMember(1)
	}
	if err != nil || m != "zk-2" {
		t.Errorf("connected member: %q, %v", m, err)
	}
	got, err := tc.resolveRole(context.Background(), role("connected-member@instance-1"), 0, 0)
	if err != nil || got.Name != "zk-2" || got.From != "connected-member@instance-1" {
		t.Errorf("connected-member@instance-1: %+v, %v", got, err)
	}
	if _, err := tc.connectedMember(9); err == nil {
		t.Error("an instance that does not exist has a member")
	}
	if got := canonAddr("[::ffff:127.0.0.1]:80"); got != "127.0.0.1:80" {
		t.Errorf("canonAddr: %s", got)
	}
}

// TestHolderInTheStoreIsFresh: a store's critical section is known from
// the workers' events, late by up to a flush: with holds of 30ms or more,
// only a client whose store began less than half the shortest hold ago is
// picked (one about to leave unseen would make the pause miss its aim),
// while a pause already applied still counts any client inside.
func TestHolderInTheStoreIsFresh(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("postgres-1"))
	tc.c.Workload.Hold = workload.Dist{Dist: "uniform", Min: config.Duration(30 * time.Millisecond), Max: config.Duration(60 * time.Millisecond)}
	tc.r.base -= int64(time.Minute)
	for n := history.Instance(1); n <= 2; n++ {
		tc.worker(t, n, "postgres-1")
	}
	now := monoclock.Since(tc.r.base)
	tc.storing["i1c0"], tc.storeSince["i1c0"] = "k0", now-int64(25*time.Millisecond) // near its end
	tc.storing["i2c0"], tc.storeSince["i2c0"] = "k0", now-int64(time.Millisecond)
	if f := tc.freshStore(); f != 15*time.Millisecond {
		t.Fatalf("fresh window %s, want half the shortest hold", f)
	}
	for choice := uint64(0); choice < 4; choice++ {
		got, err := tc.resolveRole(context.Background(), role("holder"), 0, choice)
		if err != nil || got.Instance != 2 {
			t.Errorf("choice %d: %+v %v; want instance-2, whose store just began", choice, got, err)
		}
	}
	if !tc.plays(faults.Target{Kind: faults.Instance, Name: "instance-1", Instance: 1, From: "holder"}) {
		t.Error("an instance still inside its store no longer plays holder")
	}
	tc.c.Workload.Hold = workload.Dist{Dist: "uniform", Min: config.Duration(2 * time.Millisecond), Max: config.Duration(10 * time.Millisecond)}
	if f := tc.freshStore(); f != 0 {
		t.Errorf("holds of 2ms leave no margin: fresh %s, want 0 (any)", f)
	}
}
