// Package layers holds the test that keeps the module's layers pointing
// one way: the record (history) and configuration at the bottom; the
// checker and the report above them; the backends, faults and cluster
// beside each other above those; scenarios and workers; the runner; the
// command on top. A package may import only packages of its own layer or
// below; a new package must be given a layer here.
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
	"internal/layout": 0, "internal/version": 0, "internal/wait": 0, "internal/threshold": 0, "internal/pacer": 0, "internal/links": 0, "internal/powerfs": 0,
	"internal/kube": 0, // Kubernetes objects and client-go: a leaf the cluster's Kubernetes placement uses
	"checker":       1,
	"report":        2,
	"backends":      3, "faults": 3, "internal/cluster": 3, "internal/resource": 3, "internal/targets": 3,
	"internal/scenario": 4, "internal/worker": 4, "internal/sim": 4,
	"internal/runner": 5, "internal/perf": 6,
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
		from, ok := layer[pkg]
		if !ok {
			t.Errorf("%s has no layer: add it to layers_test.go", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if to, ok := layer[dep]; ok && to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d): layers point one way, downwards", pkg, from, dep, to)
			}
		}
	}
}
