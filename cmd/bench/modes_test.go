package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/docmark"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/internal/targets"
)

// TestKubernetesMappingInDocs: docs/architecture.md's table of how the
// Kubernetes mode performs each fault is bench list -mode kubernetes's
// (-update rewrites it).
func TestKubernetesMappingInDocs(t *testing.T) {
	m, err := cluster.LookupMode(cluster.ModeKubernetes)
	if err != nil {
		t.Fatal(err)
	}
	docmark.Hold(t, "../../docs/architecture.md", "bench list -mode kubernetes", howTable(m), *update, "go test ./cmd/bench -run TestKubernetesMappingInDocs -update")
	for _, a := range faults.Actions {
		if m.How[a] == "" {
			t.Errorf("the Kubernetes mode does not say how it performs %s, or why not", a)
		}
	}
}

// TestModesFaultTable: the fault-support table of docs/architecture.md is the one bench
// list -modes makes from the deployment modes (make it again with
// `go test ./cmd/bench -run TestModesFaultTable -update` when this
// fails).
func TestModesFaultTable(t *testing.T) {
	docmark.Hold(t, "../../docs/architecture.md", "bench list -modes", modesTable(), *update, "go test ./cmd/bench -run TestModesFaultTable -update")
}

// TestValidationEnforcesTheModes: for every fault, every deployment mode
// and every class of target the fault takes, scenario validation accepts
// a use of the fault exactly when the mode says it carries it there
// (cluster.Mode.Does, with the conditions the table footnotes), on a
// machine that has everything a fault may require: what the table says is
// what validation does.
func TestValidationEnforcesTheModes(t *testing.T) {
	saved := cluster.Probe
	defer func() { cluster.Probe = saved }()
	ok := func() error { return nil }
	cluster.Probe.Firewall, cluster.Probe.Hosts, cluster.Probe.Netem, cluster.Probe.Faketime, cluster.Probe.Fuse = ok, ok, ok, ok, ok
	cluster.Probe.Cgroups = func(string) error { return nil }
	cluster.Probe.Kubernetes = ok

	servers := map[string]string{}
	for _, n := range []string{"etcd-1", "etcd-2", "etcd-3", "consul-1", "consul-2", "consul-3", "redis-1", "postgres-1", "postgres-2"} {
		servers[n] = "10.9.0.1:1"
	}
	// ctl gives every field a control section may give; bare, only the
	// required ones (what Mode.ControlNeeds asks for is then refused).
	ctl, bare, kube := map[string]*control.Section{}, map[string]*control.Section{}, map[string]*control.Section{}
	for n := range servers {
		kube[n] = &control.Section{Kubernetes: &control.Kubernetes{Namespace: "lb", Pod: n}, Pattern: "x"}
		bare[n] = &control.Section{SSH: control.SSH{Host: "10.9.0.1", User: "root", KeyEnv: "K", KnownHosts: "kh"}, PidFile: "/run/x.pid", Start: "x"}
		full := *bare[n]
		full.DataDir = "/var/lib/x"
		full.FaketimeFile = "/var/lib/x/faketime.rc"
		ctl[n] = &full
	}
	opts := map[string]func() (string, scenario.Options){
		cluster.ModeLocal: func() (string, scenario.Options) { return "", scenario.Options{} },
		cluster.ModeHosts: func() (string, scenario.Options) { return "network: hosts\n", scenario.Options{} },
		cluster.ModeCompose: func() (string, scenario.Options) {
			return "", scenario.Options{Targets: &targets.File{Path: "t.yaml", Servers: servers}, Compose: &scenario.Compose{File: "c.yml"}}
		},
		cluster.ModeTargets: func() (string, scenario.Options) {
			return "", scenario.Options{Targets: &targets.File{Path: "t.yaml", Servers: servers}}
		},
		cluster.ModeSSH: func() (string, scenario.Options) {
			return "", scenario.Options{Targets: &targets.File{Path: "t.yaml", Servers: servers, Control: ctl}}
		},
		cluster.ModeKubernetes: func() (string, scenario.Options) {
			return "", scenario.Options{Targets: &targets.File{Path: "t.yaml", Servers: servers, Control: kube}}
		},
	}
	modes := cluster.Modes()
	if len(modes) != len(opts) {
		t.Fatalf("%d modes, %d set up here: add the new mode to this test", len(modes), len(opts))
	}
	cells := 0
	for _, f := range faults.All() {
		for _, m := range modes {
			network, o := opts[m.Name]()
			for _, on := range cluster.Classes(f) {
				for _, u := range usesOf(t, f, on) {
					want := m.Does(f.Action, on)
					switch {
					case m.SourceCuts && f.Action == faults.ActCut && on == cluster.OnServer:
						want = want && cluster.BindsSource(u.kind)
					case !m.Faketime && f.Faketime(cluster.FaultKind(u.kind).Abilities):
						want = false
					case m.NoEmulatedClock && f.Asks == faults.AskClock && !f.Faketime(cluster.FaultKind(u.kind).Abilities):
						want = false
					}
					src := fmt.Sprintf("name: t\n%sworkload: {duration: 3s, instances: 2}\ncases:\n  - name: c\n    backend: %s%s\n    faults:\n      - %s\n",
						network, u.backend, u.options, strings.Replace(u.fault, "}", ", at: 1s, for: 1s}", 1))
					_, err := scenario.ParseWith("t.yaml", []byte(src), o)
					cells++
					switch {
					case want && err != nil:
						t.Errorf("%s on %s (%s) in the %s mode: the table says yes, validation says %v", f.Name, on, u.kind, m.Name, err)
					case !want && err == nil:
						t.Errorf("%s on %s (%s) in the %s mode: the table says no, validation accepts it", f.Name, on, u.kind, m.Name)
					}
					if field := m.ControlNeeds[f.Action]; field != "" && on == cluster.OnServer && o.Targets != nil {
						tf := *o.Targets
						tf.Control = bare
						if _, err := scenario.ParseWith("t.yaml", []byte(src), scenario.Options{Targets: &tf}); err == nil {
							t.Errorf("%s on %s in the %s mode: accepted on a server whose control section gives no %s", f.Name, on, m.Name, field)
						}
					}
				}
			}
		}
	}
	if cells < len(faults.All())*len(modes) {
		t.Fatalf("only %d uses tried", cells)
	}
}

// use is one use of a fault on a target of a class, in a case of backend.
type use struct {
	backend, options, fault string
	kind                    string // the target server's kind ("" for others)
}

// usesOf are the uses that try fault f on class on: one per server kind
// the answer may depend on (a cut of servers that send from their own
// address or not; a clock moved for real or emulated).
func usesOf(t *testing.T, f faults.Info, on cluster.On) []use {
	t.Helper()
	opt := map[string]string{
		"bandwidth": "rate: 10", "latency": "latency: 10ms", "slicer": "average_size: 10, size_variation: 2, delay: 1ms",
		"clock-jump": "jump: 5s", "clock-drift": "rate: 1.5", "loss": "percent: 30", "netem": "delay: 10ms",
	}[f.Name]
	fault := func(target string) string {
		s := "{type: " + f.Name + ", target: " + target
		if opt != "" {
			s += ", " + opt
		}
		return s + "}"
	}
	switch on {
	case cluster.OnInstance:
		return []use{{backend: "etcd", fault: fault("instance-1")}}
	case cluster.OnClientLink:
		return []use{{backend: "etcd", fault: fault("link:etcd-1@instance-1")}}
	case cluster.OnServerLink:
		return []use{{backend: "etcd", fault: fault("link:etcd-1-peer")}}
	}
	var us []use
	kinds := f.ActsOn(cluster.FaultKinds())
	if len(kinds) == 0 {
		kinds = []string{"etcd"}
		if f.Action == faults.ActCut {
			kinds = []string{"etcd", "consul"}
		}
	}
	for _, k := range kinds {
		switch k {
		case "redis-replicated":
			continue // redis's answer
		case "postgres":
			if f.Name == "promote" {
				us = append(us, use{backend: "postgres", options: "\n    options: {standby: true}", fault: fault("postgres-2"), kind: k})
				continue
			}
		}
		us = append(us, use{backend: k, fault: fault(k + "-1"), kind: k})
	}
	if len(us) == 0 {
		t.Fatal(errors.New("no use of " + f.Name + " on servers"))
	}
	return us
}
