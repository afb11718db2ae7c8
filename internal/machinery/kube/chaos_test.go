//go:build kubernetes

package kube

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files (testdata/, and kube/lockbench.yaml)")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenAt(t, filepath.Join("testdata", name), got)
}

// goldenAt compares got with the file at path, or rewrites it with
// -update.
func goldenAt(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -tags kubernetes ./internal/machinery/kube -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from what is made now (go test -tags kubernetes ./internal/machinery/kube -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// asYAML is an object as the dynamic client sends it, in YAML.
func asYAML(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	u, err := Unstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChaosObjects: the Chaos Mesh objects the control mode creates, as
// the API server receives them (golden files): a cut from one server's
// pod to another's, a share of the packets lost, a clock moved.
func TestChaosObjects(t *testing.T) {
	a, b := Pod{Namespace: "lockbench", Name: "etcd-0"}, Pod{Namespace: "lockbench", Name: "etcd-1"}
	golden(t, "cut.yaml", asYAML(t, Cut("lb-r1-1", "r1", a, b, 1)))
	golden(t, "loss.yaml", asYAML(t, Cut("lb-r1-2", "r1", a, b, 0.3)))
	golden(t, "clock.yaml", asYAML(t, ClockOffset("lb-r1-3", "r1", Pod{Namespace: "lockbench", Name: "postgres-0"}, "postgres", -5*time.Second)))
}

// withStatus is obj with a Chaos Mesh status written in YAML.
func withStatus(t *testing.T, status string) *unstructured.Unstructured {
	t.Helper()
	u, err := Unstructured(Cut("lb-r1-1", "r1", Pod{"ns", "a"}, Pod{"ns", "b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	if status != "" {
		var st map[string]any
		if err := yaml.Unmarshal([]byte(status), &st); err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = st
	}
	return u
}

// TestInForce: an experiment is in force only when Chaos Mesh selected
// its pods and records every one injected; anything less (no status yet,
// a pod not injected, recovered, paused) is not, and says why.
func TestInForce(t *testing.T) {
	const injected = `
conditions:
- {type: Selected, status: "True"}
- {type: AllInjected, status: "True"}
- {type: AllRecovered, status: "False"}
experiment:
  desiredPhase: Run
  containerRecords:
  - {id: ns/a, selectorKey: ".", phase: Injected, injectedCount: 1, recoveredCount: 0}
`
	for _, tt := range []struct {
		name, status, want string // want: part of the observation, or of the error
		ok                 bool
	}{
		{"injected", injected, "in force on ns/a, as Chaos Mesh records", true},
		{"no status yet", "", "has not selected its pods", false},
		{"selected, not injected", strings.Replace(strings.Replace(injected, "phase: Injected", "phase: Not Injected", 1), `AllInjected, status: "True"`, `AllInjected, status: "False"`, 1), "not injected into every pod: ns/a (Not Injected)", false},
		{"recovered", strings.Replace(strings.Replace(injected, "phase: Injected", "phase: Not Injected", 1), `AllRecovered, status: "False"`, `AllRecovered, status: "True"`, 1), "not injected into every pod", false},
		{"no record", strings.Replace(injected, "  - {id: ns/a, selectorKey: \".\", phase: Injected, injectedCount: 1, recoveredCount: 0}\n", "", 1), "records no pod", false},
	} {
		got, err := InForce(withStatus(t, tt.status))
		switch {
		case tt.ok && (err != nil || !strings.Contains(got, tt.want)):
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %q, %v; want an error saying %q", tt.name, got, err, tt.want)
		}
	}
}
