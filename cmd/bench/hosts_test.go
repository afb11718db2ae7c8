package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
)

// hostsScenario runs members as hosts of their own (network namespaces):
// a ZooKeeper leader cut from the other members (their quorum links,
// which on loopback come from 127.0.0.1 and cannot be cut by address);
// a Redis master cut from its Sentinels only, while clients and replicas
// still reach it; a PostgreSQL holder's instance cut off silently, so that
// the server itself sees its client vanish (no proxy keeps the connection
// alive) and frees its lock after its TCP user timeout; and loss on an
// etcd member's links.
const hostsScenario = `
name: hosts-test
seed: 21
network: hosts
workload: {duration: 6s, instances: 2, clients: 2, hold: {min: 1ms, max: 3ms}, ttl: 2s, acquire_timeout: 3s}
cases:
  - name: zk-leader-cut-from-members
    backend: zookeeper
    faults: [{type: isolate, target: leader, at: 1s, for: 3s}]
    expect: {violations: false, stale_writes_accepted: false}
  - name: sentinel-master-cut-from-sentinels
    backend: redis-sentinel
    options: {down_after: 1s, failover_timeout: 2s}
    workload: {duration: 8s}
    faults: [{type: isolate, target: master, from: [sentinel-1, sentinel-2, sentinel-3], at: 1s, for: 5s}]
    expect: {note: the Sentinels promote a replica while the clients still write to the old master}
  - name: postgres-client-vanishes
    backend: postgres
    options: {tcp_user_timeout: 1s, tcp_keepalives_idle: 1, tcp_keepalives_interval: 1, tcp_keepalives_count: 1}
    workload: {duration: 9s, hold: {dist: constant, value: 4s}, op_timeout: 1s}
    faults: [{type: isolate, target: holder, at: 1s, for: 6s}]
    expect: {violations: true, note: the server drops the silent client's session and its lock while the client still believes it holds it}
  - name: etcd-member-loss
    backend: etcd
    faults: [{type: loss, target: etcd-1, percent: 30, at: 1s, for: 3s}]
    # A connection that lost packets for 3 s is in TCP's retransmission
    # backoff when the loss ends: its next try may come seconds later (one
    # CI run under load waited past the default 2 s).
    expect: {violations: false, stale_writes_accepted: false, recovers_within: 6s}
`

// TestHostsMode: each fault that loopback cannot make is applied between
// hosts and observed (its rules dropped packets), every case is valid, and
// nothing of the run's hosts is left afterwards. The Sentinels really fail
// over; the PostgreSQL server really drops the vanished client.
func TestHostsMode(t *testing.T) {
	needRedis(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, hostsScenario))
	switch exitcode.Of(err) {
	case exitcode.OK, exitcode.Violation: // the Sentinel case may or may not split the brain
	default:
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	sum := readSummary(t, dir)
	recs := faultRecords(t, dir)
	for _, c := range sum.Cases {
		if !c.Check.Valid || c.Check.FaultsFired != 1 {
			t.Errorf("%s: valid=%v faults fired=%d invalid=%v", c.Check.Case, c.Check.Valid, c.Check.FaultsFired, c.Check.Invalid)
		}
	}
	for key, rec := range recs {
		if !rec.Applied || rec.Unobserved != "" || !strings.Contains(strings.Join(rec.Observed, "; "), "dropped") {
			t.Errorf("%s: applied=%v observed=%v unobserved=%q", key, rec.Applied, rec.Observed, rec.Unobserved)
		}
	}
	if h, _ := os.ReadFile(filepath.Join(dir, layout.HistoryFile)); strings.Count(string(h), `"network":"hosts"`) != len(sum.Cases) {
		t.Errorf("the case-start marks do not all record network: hosts")
	}
	by := byCase(sum)
	if c := by["zk-leader-cut-from-members"]; c.Check.Status != "ok" {
		t.Errorf("zookeeper: %s %v", c.Check.Status, c.Check.Unmet)
	}
	if c := by["postgres-client-vanishes"]; c.Check.Status != "ok" || c.Check.Violations == 0 {
		t.Errorf("postgres: the server never let another client in after its holder vanished: %s, %d violations", c.Check.Status, c.Check.Violations)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "sentinel-master-cut-from-sentinels", "sentinel-*.log"))
	switched := false
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		switched = switched || strings.Contains(string(b), "+switch-master")
	}
	if !switched {
		t.Errorf("no Sentinel switched master after the master was cut from them (%d logs)", len(logs))
	}
	info, err := layout.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, c := range info.Cases {
		if strings.Contains(string(out), fmt.Sprintf("lb%d-", c.Slot)) {
			t.Errorf("namespaces of slot %d outlived the run:\n%s", c.Slot, out)
		}
	}
}
