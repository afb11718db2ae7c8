// Package layers holds the tests that keep the module's import graph a
// house a newcomer can walk: the layers point one way (the record,
// configuration and the machinery's leaves at the bottom; the checker and
// the report above them; the backends, faults and cluster beside each
// other above those; scenarios and workers; the runner; the command on
// top), and a package may import only packages of its own layer or
// below; the graph is at most maxDepth packages deep; the worker stays
// low; and only the cluster, the runner and the command use the cluster's
// machinery. A new package must be given a layer here.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lockbench/lockbench/"

// layer of every package of the module, bottom (0) to top.
var layer = map[string]int{
	"history": 0, "internal/config": 0, "internal/suggest": 0, "internal/monoclock": 0, "internal/exitcode": 0,
	"internal/layout": 0, "internal/version": 0, "internal/childenv": 0, "internal/wait": 0, "internal/threshold": 0, "internal/pacer": 0,
	"internal/premise": 0, // tests' timing premises, checked and retried wider
	"internal/links":   0,
	"internal/docmark": 0, // the docs' generated parts, held by tests
	"internal/control": 0, // a targets file's control section: configuration the ssh and kubernetes modes act on
	"checker":          1,
	"verdict":          2, "report": 2,
	"internal/realized": 2, // the schedule each trial met, read back from a results folder
	"drivers":           0, // the reference drivers' sources, embedded
	"backends":          3, "backends/driver": 3, "faults": 3, "internal/cluster": 3, "internal/resource": 3, "internal/targets": 3,
	"internal/workload": 3, // what the clients do: the worker's input, below the scenario
	"jobs":              3, // the job strategies and their effect sink, beside the backends
	"internal/scenario": 4, "internal/worker": 4, "internal/sim": 4,
	"internal/worlds": 4, // the enumerating oracle: tests only (TestWorldsTestOnly)
	"internal/runner": 5, "internal/perf": 6,
	"internal/hunt":   5, // drawing, confirming and shrinking schedules; runs scenarios through an interface
	"internal/layers": 7, "cmd/bench": 7,
}

// TestLayersPointOneWay fails on an import from a lower layer to a higher
// one, and on a package with no layer.
func TestLayersPointOneWay(t *testing.T) {
	// With the kubernetes tag too: its files import what others do not.
	var lines []string
	for _, tags := range []string{"", "kubernetes"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(out)), "\n")...)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := layerOf(pkg)
		if !ok {
			t.Errorf("%s has no layer: add it to layers_test.go", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if to, ok := layerOf(dep); ok && to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d): layers point one way, downwards", pkg, from, dep, to)
			}
		}
	}
}

// TestWorkerStaysLow fails when the worker (the process that only takes
// locks and writes events) links the coordinator's side: a worker binary
// needs the backends, the history, the resource's client and small leaf
// packages, never the scenarios, the clusters, the faults, the runner or
// the report.
func TestWorkerStaysLow(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"internal/worker").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		pkg, ours := strings.CutPrefix(dep, module)
		if !ours {
			continue
		}
		for _, high := range []string{"internal/scenario", "internal/cluster", "faults", "internal/runner", "report", "checker", "internal/targets"} {
			if pkg == high || strings.HasPrefix(pkg, high+"/") {
				t.Errorf("internal/worker depends on %s: the worker must not link the coordinator's side", pkg)
			}
		}
	}
}

// maxDepth bounds the longest chain of imports between the module's
// packages, counted in packages (cmd/bench -> ... -> a leaf).
const maxDepth = 8

// imports lists every package of the module with the module's packages it
// imports (not its tests'), with the kubernetes build tag or without.
func imports(t *testing.T, tags string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v", tags, err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		g[pkg] = nil
		for _, imp := range fields[1:] {
			if dep, ours := strings.CutPrefix(imp, module); ours {
				g[pkg] = append(g[pkg], dep)
			}
		}
	}
	return g
}

// TestImportDepth fails when the import graph grows deeper than
// maxDepth: a tall, narrow tower is where a newcomer gets lost.
func TestImportDepth(t *testing.T) {
	for _, tags := range []string{"", "kubernetes"} {
		g := imports(t, tags)
		depth := map[string][]string{} // package -> its longest chain down
		var chain func(p string) []string
		chain = func(p string) []string {
			if c, ok := depth[p]; ok {
				return c
			}
			var longest []string
			for _, d := range g[p] {
				if c := chain(d); len(c) > len(longest) {
					longest = c
				}
			}
			depth[p] = append([]string{p}, longest...)
			return depth[p]
		}
		for p := range g {
			if c := chain(p); len(c) > maxDepth {
				t.Errorf("-tags %q: %s is %d packages deep (at most %d): %s", tags, p, len(c), maxDepth, strings.Join(c, " -> "))
			}
		}
	}
}

// machineryWing is the wing of internal/ that holds the machinery the
// cluster's deployment modes are built of, each package a leaf with its
// own tests: the FUSE layer under data dirs, iptables, cgroups, network
// namespaces, process groups, the Docker CLI, the shell on a server's host
// (SSH, a pod; remotetest: its tests' sshd), Kubernetes objects and
// client-go, the loopback slots, libfaketime. Every package under it is in
// layer 0, and only the cluster, the runner and the command import it.
const machineryWing = "internal/machinery/"

// layerOf is pkg's layer: the map's, or the layer of the wing it is in.
func layerOf(pkg string) (int, bool) {
	if l, ok := layer[pkg]; ok {
		return l, true
	}
	if strings.HasPrefix(pkg, machineryWing) {
		return 0, true
	}
	return 0, false
}

// inMachinery reports whether pkg is in the machinery's wing.
func inMachinery(pkg string) bool { return strings.HasPrefix(pkg, machineryWing) }

// TestMachineryStaysInside fails when a package other than the cluster,
// the runner, the command (or the machinery itself) imports a piece of
// the cluster's machinery: the others reach it through the cluster.
func TestMachineryStaysInside(t *testing.T) {
	allowed := func(pkg string) bool {
		switch {
		case pkg == "internal/cluster" || pkg == "internal/runner" || strings.HasPrefix(pkg, "cmd/"):
			return true
		}
		return inMachinery(pkg)
	}
	for _, tags := range []string{"", "kubernetes"} {
		for pkg, deps := range imports(t, tags) {
			if allowed(pkg) {
				continue
			}
			for _, d := range deps {
				if inMachinery(d) {
					t.Errorf("%s imports %s: only the cluster, the runner and the command use the cluster's machinery (%s)", pkg, d, machineryWing)
				}
			}
		}
	}
}

// TestWorldsTestOnly fails when a package imports internal/worlds, or
// when it grows a file that is not a test (beyond its doc.go): the
// enumerating oracle judges the checker from outside, and nothing the
// checker or a command runs may lean on it.
func TestWorldsTestOnly(t *testing.T) {
	for _, tags := range []string{"", "kubernetes"} {
		for pkg, deps := range imports(t, tags) {
			for _, d := range deps {
				if d == "internal/worlds" {
					t.Errorf("%s imports internal/worlds, a test-only package", pkg)
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{join .GoFiles \" \"}}", module+"internal/worlds").Output()
	if err != nil {
		t.Fatalf("go list internal/worlds: %v", err)
	}
	if files := strings.Fields(string(out)); len(files) != 1 || files[0] != "doc.go" {
		t.Errorf("internal/worlds has non-test files %v: only doc.go may be", files)
	}
}
