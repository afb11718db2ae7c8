package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/cluster"
)

// TestListSaysWhatEachFaultActsOn: bench list -json names, per fault, the
// server kinds it is limited to (those that declare what faults.Info.Asks),
// and the text listing
// says it in the targets.
func TestListSaysWhatEachFaultActsOn(t *testing.T) {
	stdout, _, err := runInProcess(t, "list", "-json", "../../scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var l listing
	if err := json.Unmarshal([]byte(stdout), &l); err != nil {
		t.Fatal(err)
	}
	byName := map[string]faultEntry{}
	for _, f := range l.Faults {
		byName[f.Name] = f
	}
	if k := byName["memory-pressure"].ServerKinds; !slices.Equal(k, []string{"redis", "redis-replicated"}) {
		t.Errorf("memory-pressure server kinds %v", k)
	}
	if k := byName["pause"].ServerKinds; len(k) != 0 {
		t.Errorf("pause acts on any server, listed as %v", k)
	}
	text, _, err := runInProcess(t, "list", "-brief", "../../scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "(targets: server of kind postgres; takes over: process; runs in: local (servers), hosts (servers), compose (servers))") {
		t.Errorf("promote's line does not say it acts on PostgreSQL only, takes over the process and runs on lockbench's own servers only:\n%s", text)
	}
	if m := byName["pause"].Modes; !slices.Equal(m["targets"], []cluster.On{cluster.OnInstance}) || len(m["ssh"]) != 2 {
		t.Errorf("pause's modes %v: want instances only with a targets file, servers and instances over SSH", m)
	}
	if c := byName["disk-stall"].Claims; !slices.Equal(c, []string{"cgroup:blkio"}) {
		t.Errorf("disk-stall claims %v", c)
	}
	for _, want := range []string{"nats", "redis-streams", "leader", "skip-locked"} {
		if !slices.ContainsFunc(l.Strategies, func(s strategyEntry) bool { return s.Name == want }) {
			t.Errorf("job strategy %s is not listed", want)
		}
	}
	if !strings.Contains(text, "JOB STRATEGIES") || !strings.Contains(text, "redis-streams") {
		t.Errorf("the text listing has no job strategies:\n%s", text)
	}
	if c := byName["latency"].Claims; !slices.Equal(c, []string{"latency"}) {
		t.Errorf("latency claims %v, want its own name", c)
	}
}

// TestListAnywhere: bench list run where there is no scenarios/ folder
// still lists the backends and faults, and says where scenarios come from.
func TestListAnywhere(t *testing.T) {
	t.Chdir(t.TempDir())
	out, _, err := runInProcess(t, "list", "-brief")
	if err != nil || !strings.Contains(out, "BACKENDS") || !strings.Contains(out, "none here") {
		t.Fatalf("bench list in an empty directory: %v\n%s", err, out)
	}
}
