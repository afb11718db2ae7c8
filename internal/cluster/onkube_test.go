//go:build kubernetes

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/machinery/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeCluster is what the Kubernetes placement is tested against: the
// API server is client-go's fake clients, Chaos Mesh is a reactor that
// records every object it is given injected, and each "pod" is a real
// process group on this machine (a sleep) that the pod's exec runs real
// shell commands against, with /tmp and the cgroup root moved to a
// directory of the test's own and iptables left out (an agent container
// has none). Deleting a pod kills its process and, as a StatefulSet
// would, makes the pod again with a new uid and a new process.
type fakeCluster struct {
	t    *testing.T
	core *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	dir  string

	mu    sync.Mutex
	procs map[string]*exec.Cmd // pod name -> its server process
	gen   int
}

const fakeNS = "lb"

func newFakeCluster(t *testing.T, pods ...string) *fakeCluster {
	t.Helper()
	scheme := runtime.NewScheme()
	f := &fakeCluster{t: t, core: fake.NewClientset(), dir: t.TempDir(), procs: map[string]*exec.Cmd{},
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
			kube.NetworkChaosResource: "NetworkChaosList", kube.TimeChaosResource: "TimeChaosList"})}
	// Chaos Mesh: every object is injected into the pods it selects.
	f.dyn.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		var ids []any
		for ns, names := range u.Object["spec"].(map[string]any)["selector"].(map[string]any)["pods"].(map[string]any) {
			for _, n := range names.([]any) {
				ids = append(ids, map[string]any{"id": ns + "/" + n.(string), "selectorKey": ".", "phase": "Injected", "injectedCount": int64(1), "recoveredCount": int64(0)})
			}
		}
		u.Object["status"] = map[string]any{
			"conditions": []any{map[string]any{"type": "Selected", "status": "True"}, map[string]any{"type": "AllInjected", "status": "True"}},
			"experiment": map[string]any{"desiredPhase": "Run", "containerRecords": ids},
		}
		return false, nil, nil
	})
	// A StatefulSet: a deleted pod comes back with a new uid.
	f.core.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		f.stop(name)
		go func() {
			time.Sleep(300 * time.Millisecond)
			f.addPod(name)
		}()
		return false, nil, nil
	})
	for _, p := range pods {
		f.addPod(p)
	}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.procs {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			c.Wait()
		}
	})
	return f
}

// addPod starts the pod's server process and makes its pod object.
func (f *fakeCluster) addPod(name string) {
	f.mu.Lock()
	f.gen++
	gen := f.gen
	// The pattern the control section gives finds it by its pod name.
	cmd := exec.Command("bash", "-c", "exec -a lbfake-"+name+" sleep 600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.mu.Unlock()
		f.t.Error(err)
		return
	}
	f.procs[name] = cmd
	f.mu.Unlock()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fakeNS, UID: types.UID(fmt.Sprintf("uid-%s-%d", name, gen))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server"}, {Name: "lockbench-agent"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "server", Ready: true}, {Name: "lockbench-agent", Ready: true}}}}
	if _, err := f.core.CoreV1().Pods(fakeNS).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		f.t.Error(err)
	}
}

// stop kills the pod's server process, as deleting the pod does.
func (f *fakeCluster) stop(name string) {
	f.mu.Lock()
	c := f.procs[name]
	delete(f.procs, name)
	f.mu.Unlock()
	if c != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	}
}

// Exec runs the command on this machine, in the test's own /tmp and
// cgroup root, without iptables.
func (f *fakeCluster) Exec(ctx context.Context, pod kube.Pod, container string, cmd []string) (string, int, error) {
	if container != "lockbench-agent" || len(cmd) != 3 || cmd[0] != "sh" {
		return "", 0, fmt.Errorf("unexpected exec %v in %s/%s", cmd, pod, container)
	}
	// Paths already in the test's directory (the notes directory the
	// harness was told) stay as they are.
	parts := strings.Split(cmd[2], f.dir)
	for i := range parts {
		parts[i] = strings.NewReplacer("/tmp/", f.dir+"/", cgroup.Root, f.dir+"/cgroup", "iptables", ":").Replace(parts[i])
		if i == 0 {
			parts[i] = strings.ReplaceAll(parts[i], "/run/lockbench/", f.dir+"/run/lockbench/")
		}
	}
	line := strings.Join(parts, f.dir)
	c := exec.CommandContext(ctx, "bash", "-c", line)
	c.Env = append(os.Environ(), "HOME="+f.dir+"/home")
	out, err := c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode(), nil
	}
	return string(out), 0, err
}

func (f *fakeCluster) client() *kube.Client {
	return &kube.Client{Core: f.core, Dynamic: f.dyn, Exec: f, Where: "fake"}
}

func (f *fakeCluster) objects(t *testing.T, gvr schema.GroupVersionResource) []unstructured.Unstructured {
	t.Helper()
	l, err := f.dyn.Resource(gvr).Namespace(fakeNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestKubernetesControlPlane: the Kubernetes placement against fake
// clients and real processes standing for the pods' servers: it deletes a
// dead run's Chaos Mesh objects and resumes a group a dead run stopped
// before it attaches; a pause stops the server's group as the pod's agent
// sees it; a kill deletes the pod, is seen when the pod is replaced, and
// the restart finds the new pod's process; a cut between two servers is a
// NetworkChaos from one pod to the other, in force as Chaos Mesh records
// it, deleted at heal; a clock jump is a TimeChaos of the total offset,
// replacing the one before; Close deletes what is left.
func TestKubernetesControlPlane(t *testing.T) {
	f := newFakeCluster(t, "etcd-0", "etcd-1")
	kc := f.client()
	// A dead run's leftovers: a NetworkChaos, and a stopped group noted.
	old, _ := kube.Unstructured(kube.Cut("lb-old-1", "old", kube.Pod{Namespace: fakeNS, Name: "etcd-0"}, kube.Pod{Namespace: fakeNS, Name: "etcd-1"}, 1))
	if err := kc.Create(context.Background(), kube.NetworkChaosResource, old); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	pg := f.procs["etcd-1"].Process.Pid
	f.mu.Unlock()
	syscall.Kill(-pg, syscall.SIGSTOP)
	os.MkdirAll(filepath.Join(f.dir, "run/lockbench/stopped"), 0o700)
	os.WriteFile(filepath.Join(f.dir, "run/lockbench/stopped", fmt.Sprintf("%d-%d", 999999, pg)), []byte(fmt.Sprint(pg)), 0o600)

	ctl := map[string]*control.Section{}
	for i, pod := range []string{"etcd-0", "etcd-1"} {
		ctl[fmt.Sprintf("etcd-%d", i+1)] = &control.Section{Kubernetes: &control.Kubernetes{Namespace: fakeNS, Pod: pod}, Pattern: "lbfake-" + pod}
	}
	var logged []string
	o, err := newOnKube(external{}, ctl, "Run 42/x", func(*control.Kubernetes) (*kube.Client, error) { return kc, nil })
	if err != nil {
		t.Fatal(err)
	}
	o.log = func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }
	servers := map[string]*Server{}
	for _, n := range []string{"etcd-1", "etcd-2"} {
		s := &Server{Spec: backends.ServerSpec{Name: n, Kind: "etcd"}, IP: n + ".example", Addr: n + ".example:2379"}
		if err := o.attach(s); err != nil {
			t.Fatalf("attach %s: %v", n, err)
		}
		servers[n] = s
		t.Cleanup(func() { o.release(s) })
	}
	if got := strings.Join(logged, "\n"); !strings.Contains(got, "deleted NetworkChaos lb-old-1") || !strings.Contains(got, fmt.Sprintf("resumed process group %d", pg)) {
		t.Errorf("the repair did not say it deleted the old run's object and resumed its group:\n%s", got)
	}
	if st, _ := servers["etcd-2"].Process().Stopped(); st {
		t.Error("etcd-2, stopped by a dead run, was not resumed")
	}

	// A pause.
	s1 := servers["etcd-1"]
	if err := o.signal(s1, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if st, err := s1.Process().Stopped(); err != nil || !st {
		t.Errorf("after SIGSTOP the agent sees etcd-1 stopped %v (%v)", st, err)
	}
	if err := o.signal(s1, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if st, _ := s1.Process().Stopped(); st {
		t.Error("after SIGCONT etcd-1 is still stopped")
	}

	// A kill and the restart.
	oldPid := s1.Process().Pid()
	if err := o.kill(s1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s1.Process().Done():
	case <-time.After(time.Minute): // two polls through the API server: a hang's bound
		t.Fatal("the watch did not see the pod go in a minute")
	}
	if err := o.restart(context.Background(), nil, s1); err != nil {
		t.Fatal(err)
	}
	if p := s1.Process(); !p.Alive() || p.Pid() == oldPid {
		t.Errorf("after the restart etcd-1 is pid %d (alive %v), before %d", p.Pid(), p.Alive(), oldPid)
	}

	// A cut.
	cut, err := o.drop(firewall.Endpoint{IP: "etcd-1.example"}, firewall.Endpoint{IP: "etcd-2.example"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	objs := f.objects(t, kube.NetworkChaosResource)
	if len(objs) != 1 {
		t.Fatalf("%d NetworkChaos objects, want 1", len(objs))
	}
	spec := objs[0].Object["spec"].(map[string]any)
	if objs[0].GetName() != "lb-run-42-x-1" || spec["action"] != "partition" || fmt.Sprint(spec["selector"].(map[string]any)["pods"]) != "map[lb:[etcd-0]]" ||
		fmt.Sprint(spec["target"].(map[string]any)["selector"].(map[string]any)["pods"]) != "map[lb:[etcd-1]]" {
		t.Errorf("the cut etcd-1 -> etcd-2 made %s: %v", objs[0].GetName(), spec)
	}
	if s, err := cut.(interface {
		InForce(context.Context) (string, error)
	}).InForce(context.Background()); err != nil || !strings.Contains(s, "etcd-1 -> etcd-2: NetworkChaos lb-run-42-x-1 in force on lb/etcd-0") {
		t.Errorf("in force: %q, %v", s, err)
	}
	if _, err := cut.Packets(); err == nil {
		t.Error("a Chaos Mesh cut claimed a packet count")
	}
	if err := cut.Undo(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.objects(t, kube.NetworkChaosResource)); n != 0 {
		t.Errorf("%d NetworkChaos left after the heal", n)
	}

	// Two clock jumps: one TimeChaos of the total.
	if err := o.jumpClock("etcd-2", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := o.jumpClock("etcd-2", -2*time.Second); err != nil {
		t.Fatal(err)
	}
	tc := f.objects(t, kube.TimeChaosResource)
	if len(tc) != 1 || tc[0].Object["spec"].(map[string]any)["timeOffset"] != "3s" || fmt.Sprint(tc[0].Object["spec"].(map[string]any)["containerNames"]) != "[server]" {
		t.Errorf("after +5s and -2s: %d TimeChaos, %v", len(tc), tc)
	}
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.objects(t, kube.TimeChaosResource)); n != 0 {
		t.Errorf("%d TimeChaos left after Close", n)
	}
}
