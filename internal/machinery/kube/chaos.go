//go:build kubernetes

package kube

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pod names a pod.
type Pod struct{ Namespace, Name string }

func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// The labels every object lockbench creates carries: ManagedBy's value,
// and the run it belongs to (a run's objects are found, and a dead run's
// removed, by them).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "lockbench"
	LabelRun       = "lockbench/run"
)

// Labels are the labels of an object of run.
func Labels(run string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelRun: run}
}

// The Chaos Mesh resources lockbench creates.
var (
	NetworkChaosResource = schema.GroupVersionResource{Group: "chaos-mesh.org", Version: "v1alpha1", Resource: "networkchaos"}
	TimeChaosResource    = schema.GroupVersionResource{Group: "chaos-mesh.org", Version: "v1alpha1", Resource: "timechaos"}
)

// ChaosResources are the resources a run's clean-up looks through.
var ChaosResources = []schema.GroupVersionResource{NetworkChaosResource, TimeChaosResource}

// Cut is the NetworkChaos that drops what from sends to to, below TCP:
// every packet (action partition, direction to), or a share p of them
// (action loss, p in (0, 1)). It lasts until deleted (no duration): the
// fault's window is lockbench's to keep.
func Cut(name, run string, from, to Pod, p float64) *v1alpha1.NetworkChaos {
	nc := &v1alpha1.NetworkChaos{
		TypeMeta:   metav1.TypeMeta{APIVersion: "chaos-mesh.org/v1alpha1", Kind: "NetworkChaos"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: from.Namespace, Labels: Labels(run)},
		Spec: v1alpha1.NetworkChaosSpec{
			PodSelector: selectPod(from),
			Action:      v1alpha1.PartitionAction,
			Direction:   v1alpha1.To,
			Target:      ptr(selectPod(to)),
		},
	}
	if p > 0 && p < 1 {
		nc.Spec.Action = v1alpha1.LossAction
		nc.Spec.TcParameter.Loss = &v1alpha1.LossSpec{Loss: strconv.FormatFloat(100*p, 'f', -1, 64), Correlation: "0"}
	}
	return nc
}

// ClockOffset is the TimeChaos that moves the wall clock
// (CLOCK_REALTIME) of a container's processes by d, through their vDSO:
// Go servers too, which libfaketime cannot reach. It lasts until deleted,
// and deleting it sets the clock right again.
func ClockOffset(name, run string, pod Pod, container string, d time.Duration) *v1alpha1.TimeChaos {
	return &v1alpha1.TimeChaos{
		TypeMeta:   metav1.TypeMeta{APIVersion: "chaos-mesh.org/v1alpha1", Kind: "TimeChaos"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pod.Namespace, Labels: Labels(run)},
		Spec: v1alpha1.TimeChaosSpec{
			ContainerSelector: v1alpha1.ContainerSelector{PodSelector: selectPod(pod), ContainerNames: []string{container}},
			TimeOffset:        d.String(),
			ClockIds:          []string{"CLOCK_REALTIME"},
		},
	}
}

// selectPod selects exactly one pod, by name.
func selectPod(p Pod) v1alpha1.PodSelector {
	return v1alpha1.PodSelector{
		Selector: v1alpha1.PodSelectorSpec{
			GenericSelectorSpec: v1alpha1.GenericSelectorSpec{Namespaces: []string{p.Namespace}},
			Pods:                map[string][]string{p.Namespace: {p.Name}},
		},
		Mode: v1alpha1.AllMode,
	}
}

func ptr[T any](v T) *T { return &v }

// Unstructured turns a typed object into what the dynamic client sends,
// without its (empty) status: Chaos Mesh fills that in.
func Unstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	return &unstructured.Unstructured{Object: m}, nil
}

// InForce reads a Chaos Mesh object's status and says what it shows in
// force, or why not: it is in force when Chaos Mesh selected its pods and
// records every one of them injected (condition AllInjected, and every
// record in phase Injected). That record is the observation the model
// accepts for rules an outside injector keeps (checker/MODEL.md §10).
func InForce(u *unstructured.Unstructured) (string, error) {
	var st v1alpha1.ChaosStatus
	if raw, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st); err != nil {
			return "", fmt.Errorf("%s %s: status: %w", u.GetKind(), u.GetName(), err)
		}
	}
	what := u.GetKind() + " " + u.GetName()
	cond := map[v1alpha1.ChaosConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		cond[c.Type] = c.Status
	}
	switch {
	case cond[v1alpha1.ConditionSelected] != corev1.ConditionTrue:
		return "", fmt.Errorf("%s: Chaos Mesh has not selected its pods", what)
	case len(st.Experiment.Records) == 0:
		return "", fmt.Errorf("%s: Chaos Mesh records no pod", what)
	}
	var in, out []string
	for _, r := range st.Experiment.Records {
		if r.Phase == v1alpha1.Injected {
			in = append(in, r.Id)
		} else {
			out = append(out, fmt.Sprintf("%s (%s)", r.Id, r.Phase))
		}
	}
	sort.Strings(in)
	sort.Strings(out)
	if len(out) > 0 || cond[v1alpha1.ConditionAllInjected] != corev1.ConditionTrue {
		return "", fmt.Errorf("%s: not injected into every pod: %s", what, strings.Join(out, ", "))
	}
	return fmt.Sprintf("%s in force on %s, as Chaos Mesh records", what, strings.Join(in, ", ")), nil
}

// ErrNotFound is the error (wrapped) of reading a pod or an object that
// does not exist.
var ErrNotFound = errors.New("not found")
