package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestListSaysWhatEachFaultActsOn: bench list -json names, per fault, the
// server kinds it is limited to (faults.Info.Kinds), and the text listing
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
	if !strings.Contains(text, "(targets: server of kind postgres; takes over: process)") {
		t.Errorf("promote's line does not say it acts on PostgreSQL only and takes over the process:\n%s", text)
	}
	if c := byName["disk-stall"].Claims; !slices.Equal(c, []string{"cgroup:blkio"}) {
		t.Errorf("disk-stall claims %v", c)
	}
	if c := byName["latency"].Claims; !slices.Equal(c, []string{"latency"}) {
		t.Errorf("latency claims %v, want its own name", c)
	}
}
