package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/layout"
)

// composeScenario runs against the etcd part of compose/docker-compose.yml.
const composeScenario = `
name: compose-test
seed: 9
workload: {duration: 5s, instances: 2, clients: 2, hold: {min: 2ms, max: 10ms}, ttl: 2s, acquire_timeout: 3s, abort_on_lost: false}
cases:
  - {name: etcd, backend: etcd}
  - name: etcd-kill-leader
    backend: etcd
    faults: [{type: kill, target: leader, at: 1s, for: 3s, failover: true}]
  - name: etcd-pause-holder
    backend: etcd
    workload: {duration: 7s, hold: {min: 300ms, max: 500ms}}   # docker pause takes a moment: the holder must still be inside
    faults: [{type: pause, target: holder, at: 1s, for: 4s}]
    expect: {violations: true}
  - name: etcd-member-cut
    backend: etcd
    faults: [{type: isolate, target: etcd-1, at: 1s, for: 2s}]
    # Clients stuck on etcd-1's connections recover when TCP retransmits:
    # about a second on an idle machine, more than five seen under the
    # load of make test. The cut itself is this test's, not etcd's speed.
    expect: {measure: true}
`

// TestComposeTopology builds the topology's images from a Docker Engine
// that may have none (scratch images of static builds: no registry), brings
// up compose/docker-compose.yml's etcd ensemble and toxiproxy, and runs
// against it with the worker instances as containers: the leader's
// container is killed and started again, a holder's container paused, a
// member's container cut from its peers inside its own network namespace;
// each effect is observed, every case valid, and the topology comes down.
func TestComposeTopology(t *testing.T) {
	integration(t)
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatalf("docker-compose is not installed: %v", err)
	}
	img := exec.Command("bash", "../../scripts/compose-images.sh", "--minimal")
	if out, err := img.CombinedOutput(); err != nil {
		t.Fatalf("compose-images: %v\n%s", err, out)
	}
	compose := func(args ...string) {
		t.Helper()
		cmd := exec.Command("docker-compose", append([]string{"-f", "../../compose/docker-compose.yml", "-p", "lockbenchtest", "--profile", "etcd"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker-compose %v: %v\n%s", args, err, out)
		}
	}
	compose("up", "-d", "--remove-orphans")
	t.Cleanup(func() { compose("down", "-v", "--remove-orphans") })

	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, "-targets", "../../compose/targets.yaml",
		"-compose", "../../compose/docker-compose.yml", "-compose-project", "lockbenchtest", writeScenario(t, composeScenario))
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	var p premises
	defer p.done(t)
	hold := map[string]time.Duration{"etcd-pause-holder": 500 * time.Millisecond}
	for _, c := range readSummary(t, dir).Cases {
		if !c.Check.Valid || c.Check.Status != "ok" {
			t.Errorf("%s: %s, valid=%v, %d acquisitions, %v", c.Check.Case, c.Check.Status, c.Check.Valid, c.Metrics.Acquisitions, c.Check.Invalid)
		}
		p.acquisitions(t, c, 10, max(hold[c.Check.Case], 10*time.Millisecond))
	}
	for key, rec := range faultRecords(t, dir) {
		if !rec.Applied || rec.Unobserved != "" {
			t.Errorf("%s: applied=%v unobserved=%q", key, rec.Applied, rec.Unobserved)
		}
	}
	info, err := layout.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range info.Cases {
		if len(c.Containers) != 2 {
			t.Errorf("case %d ran its worker instances as %v, want two containers", i, c.Containers)
		}
	}
	if out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=lockbench.slot", "--format", "{{.Names}}").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("worker containers outlived the run: %s", out)
	}
}
