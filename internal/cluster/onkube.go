//go:build kubernetes

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/machinery/remote"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/machinery/kube"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func init() {
	kubePlane = func(ext external, ctl map[string]*control.Section, runID string) (placement, error) {
		return newOnKube(ext, ctl, runID, func(k *control.Kubernetes) (*kube.Client, error) { return kube.New(k.Kubeconfig, k.Context) })
	}
}

// onKube is the placement of a targets file's servers that run in
// Kubernetes pods (see control.Kubernetes): found at the file's addresses like any
// external server, their processes acted on from each pod's agent
// container through the pods/exec API (the same shell commands as over
// SSH), their pods deleted for a kill, and cut from each other and their
// clocks moved by Chaos Mesh objects the run creates and deletes. Before
// the first case it removes what a run no longer running left (every
// Chaos Mesh object labelled managed-by lockbench in the namespace: one
// coordinator drives a namespace at a time; the groups a dead run
// stopped) and makes sure every controlled server runs, unstopped; at
// Close it deletes every object it made and leaves every server running
// and resumed. Worker instances run where bench runs, as with any
// targets file, and are cut by their connections' marks.
type onKube struct {
	external
	ctl     map[string]*control.Section
	run     string // the run's label value
	connect func(*control.Kubernetes) (*kube.Client, error)
	log     func(format string, args ...any)

	mu       sync.Mutex
	clients  map[string]*kube.Client // by kubeconfig and context
	repaired map[string]bool         // namespaces cleaned of dead runs' objects
	byIP     map[string]string       // a controlled server's IP (host) -> its name
	seq      int
	made     []*chaosObject // objects of this run not deleted yet
	clocks   map[string]*clockShift
}

func newOnKube(ext external, ctl map[string]*control.Section, runID string, connect func(*control.Kubernetes) (*kube.Client, error)) (*onKube, error) {
	return &onKube{external: ext, ctl: ctl, run: labelValue(runID), connect: connect,
		log:     func(format string, args ...any) { fmt.Fprintf(os.Stderr, "control: "+format+"\n", args...) },
		clients: map[string]*kube.Client{}, repaired: map[string]bool{}, byIP: map[string]string{}, clocks: map[string]*clockShift{}}, nil
}

// labelValue makes s a Kubernetes label value and name part: lower case
// letters, digits and dashes, at most 40 characters.
func labelValue(s string) string {
	s = strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 40 {
		s = strings.Trim(s[len(s)-40:], "-")
	}
	if s == "" {
		s = "run"
	}
	return s
}

// client is the cluster a server's control section names, connected once.
func (o *onKube) client(k *control.Kubernetes) (*kube.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := k.Kubeconfig + "\x00" + k.Context
	if c := o.clients[key]; c != nil {
		return c, nil
	}
	c, err := o.connect(k)
	if err != nil {
		return nil, err
	}
	o.clients[key] = c
	return c, nil
}

func pollUntil(ctx context.Context, every time.Duration, ok func() bool, timeout error) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return timeout
		case <-time.After(every):
		}
	}
	return nil
}

func (o *onKube) start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	if err := o.register(ctx, c, specs, o.attach); err != nil {
		return err
	}
	return awaitLeader(ctx, c, specs)
}

// attach finds a controlled server's pod and process (waiting for a pod a
// dead run left deleted to come back, resuming a group it left stopped)
// and watches it.
func (o *onKube) attach(s *Server) error {
	ctl := o.ctl[s.Spec.Name]
	if ctl == nil {
		return nil
	}
	k := ctl.Kubernetes
	kc, err := o.client(k)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Spec.Name, err)
	}
	if err := o.repair(kc, k.Namespace); err != nil {
		return err
	}
	o.mu.Lock()
	o.byIP[s.IP] = s.Spec.Name
	o.mu.Unlock()
	p, err := o.find(context.Background(), s, kc, ctl, 2*time.Minute)
	if err != nil {
		return err
	}
	// One coordinator drives a namespace at a time: a note of any other
	// harness is a dead run's.
	did, err := remote.Repair(p.Shell(), func(pid int) bool { return pid == os.Getpid() })
	for _, d := range did {
		o.log("%s (left by a run that is gone)", d)
	}
	if err != nil {
		return err
	}
	proc := procgroup.NewRemote(s.Spec.Name, p)
	if stopped, err := proc.Stopped(); err == nil && stopped {
		o.log("%s was stopped; resuming it", s.Spec.Name)
		if err := proc.Signal(syscall.SIGCONT); err != nil {
			proc.Detach()
			return err
		}
	}
	s.setProcess(proc)
	return nil
}

// repair deletes, once per namespace, the Chaos Mesh objects runs that
// are gone left there: every one lockbench made, since one coordinator
// drives a namespace at a time.
func (o *onKube) repair(kc *kube.Client, ns string) error {
	o.mu.Lock()
	done := o.repaired[ns]
	o.repaired[ns] = true
	o.mu.Unlock()
	if done {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := kc.DeleteManaged(ctx, ns, "")
	for _, n := range names {
		o.log("deleted %s in %s (left by a run that is gone)", n, ns)
	}
	return err
}

// find waits until the server's pod runs with every container ready and
// the agent finds its process there.
func (o *onKube) find(ctx context.Context, s *Server, kc *kube.Client, ctl *control.Section, timeout time.Duration) (*remote.PodProc, error) {
	k := ctl.Kubernetes
	pod := kube.Pod{Namespace: k.Namespace, Name: k.Pod}
	h := &remote.PodShell{KC: kc, Pod: pod, Agent: k.AgentName()}
	var p *remote.PodProc
	var last error
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := pollUntil(ctx, 250*time.Millisecond, func() bool {
		st, err := kc.State(ctx, pod)
		if err != nil || !st.Ready || st.Deleting {
			last = fmt.Errorf("pod %s not ready (%v)", pod, err)
			return false
		}
		r, err := remote.LocateOnce(h, ctl, s.Spec.Name)
		if err != nil {
			last = err
			return false
		}
		p = &remote.PodProc{Proc: r, KC: kc, Pod: pod, UID: st.UID, Restarts: st.Restarts}
		return true
	}, nil)
	if err != nil || p == nil {
		return nil, fmt.Errorf("%s: %v", s.Spec.Name, last)
	}
	return p, nil
}

func (o *onKube) controlled(s *Server) (*control.Section, error) {
	ctl := o.ctl[s.Spec.Name]
	if ctl == nil || s.Process() == nil {
		return nil, fmt.Errorf("%s has no control section in the targets file: lockbench does not act on it", s.Spec.Name)
	}
	return ctl, nil
}

func (o *onKube) kill(s *Server) error {
	if _, err := o.controlled(s); err != nil {
		return err
	}
	return s.Process().Kill(time.Minute)
}

func (o *onKube) signal(s *Server, sig syscall.Signal) error {
	if _, err := o.controlled(s); err != nil {
		return err
	}
	return s.Process().Signal(sig)
}

// restart waits for the pod its StatefulSet made again and the server
// answering in it.
func (o *onKube) restart(ctx context.Context, _ *Cluster, s *Server) error {
	ctl, err := o.controlled(s)
	if err != nil {
		return err
	}
	if s.Process().Alive() {
		return fmt.Errorf("restart %s: still running", s.Spec.Name)
	}
	kc, err := o.client(ctl.Kubernetes)
	if err != nil {
		return err
	}
	p, err := o.find(ctx, s, kc, ctl, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("restart %s: %w", s.Spec.Name, err)
	}
	s.setProcess(procgroup.NewRemote(s.Spec.Name, p))
	return nil
}

func (o *onKube) separable(s *Server) error {
	_, err := o.controlled(s)
	return err
}

// drop cuts a from b: between two controlled servers with a NetworkChaos
// from a's pod to b's, seen in force as Chaos Mesh records it; from or to
// a worker instance here, by its mark, as with any targets file.
func (o *onKube) drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	o.mu.Lock()
	an, bn := o.byIP[a.IP], o.byIP[b.IP]
	o.mu.Unlock()
	if a.Mark != 0 || b.Mark != 0 {
		return o.fw.DropSome(a, b, p)
	}
	if an == "" || bn == "" {
		return nil, fmt.Errorf("cut %s -> %s: a NetworkChaos cuts between pods, and one side is a server with no control section", a.IP, b.IP)
	}
	if a.Port != 0 || b.Port != 0 || a.Proto != "" || b.Proto != "" {
		return nil, fmt.Errorf("cut %s -> %s: a NetworkChaos cuts every protocol and port between two pods, not one", an, bn)
	}
	ka, kb := o.ctl[an].Kubernetes, o.ctl[bn].Kubernetes
	kc, err := o.client(ka)
	if err != nil {
		return nil, err
	}
	name := o.name()
	obj := kube.Cut(name, o.run, kube.Pod{Namespace: ka.Namespace, Name: ka.Pod}, kube.Pod{Namespace: kb.Namespace, Name: kb.Pod}, p)
	return o.inject(kc, kube.NetworkChaosResource, obj, fmt.Sprintf("%s -> %s", an, bn))
}

// name is the next object name of the run.
func (o *onKube) name() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	return fmt.Sprintf("lb-%s-%d", o.run, o.seq)
}

// injectWait bounds how long Chaos Mesh may take to inject an object, or
// to recover it once deleted.
const injectWait = 30 * time.Second

// inject creates a Chaos Mesh object and waits until Chaos Mesh records
// it in force on every pod it selects.
func (o *onKube) inject(kc *kube.Client, gvr schema.GroupVersionResource, obj runtime.Object, what string) (*chaosObject, error) {
	u, err := kube.Unstructured(obj)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), injectWait)
	defer cancel()
	if err := kc.Create(ctx, gvr, u); err != nil {
		return nil, err
	}
	c := &chaosObject{kc: kc, gvr: gvr, ns: u.GetNamespace(), name: u.GetName(), what: what}
	o.mu.Lock()
	o.made = append(o.made, c)
	o.mu.Unlock()
	var last error
	if err := pollUntil(ctx, 200*time.Millisecond, func() bool { _, last = c.InForce(ctx); return last == nil }, nil); err != nil || last != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", what, last), c.Undo())
	}
	return c, nil
}

// chaosObject is a Chaos Mesh object of the run in force: a cut lockbench
// cannot count packets of (faults.Injected).
type chaosObject struct {
	kc       *kube.Client
	gvr      schema.GroupVersionResource
	ns, name string
	what     string
	once     sync.Once
	undoErr  error
}

// Packets: Chaos Mesh counts nothing lockbench can read; the cut is
// observed by InForce instead (checker/MODEL.md §10).
func (c *chaosObject) Packets() (int64, error) {
	return 0, fmt.Errorf("%s: Chaos Mesh does not count what it drops", c.name)
}

// InForce reads the object's status from the API.
func (c *chaosObject) InForce(ctx context.Context) (string, error) {
	u, err := c.kc.Get(ctx, c.gvr, c.ns, c.name)
	if err != nil {
		return "", err
	}
	s, err := kube.InForce(u)
	if err != nil {
		return "", err
	}
	return c.what + ": " + s, nil
}

// Undo deletes the object and waits until it is gone: Chaos Mesh lets it
// go once it has recovered every pod.
func (c *chaosObject) Undo() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), injectWait)
		defer cancel()
		if c.undoErr = c.kc.Delete(ctx, c.gvr, c.ns, c.name); c.undoErr != nil {
			return
		}
		c.undoErr = pollUntil(ctx, 200*time.Millisecond, func() bool {
			_, err := c.kc.Get(ctx, c.gvr, c.ns, c.name)
			return errors.Is(err, kube.ErrNotFound)
		}, fmt.Errorf("%s %s: not recovered within %s", c.gvr.Resource, c.name, injectWait))
	})
	return c.undoErr
}

// clockShift is a server's clock moved by TimeChaos: the total offset,
// and the object that keeps it.
type clockShift struct {
	total time.Duration
	obj   *chaosObject
}

// jumpClock moves a server's wall clock by d more, with a TimeChaos of
// the total offset (it replaces the previous one: Chaos Mesh offsets do
// not add up). The clock stays moved until the cluster closes, as a
// stepped clock does; deleting the object at Close sets it right.
func (o *onKube) jumpClock(name string, d time.Duration) error {
	ctl := o.ctl[name]
	if ctl == nil {
		return fmt.Errorf("clock jump: %s has no control section", name)
	}
	k := ctl.Kubernetes
	kc, err := o.client(k)
	if err != nil {
		return err
	}
	o.mu.Lock()
	cs := o.clocks[name]
	if cs == nil {
		cs = &clockShift{}
		o.clocks[name] = cs
	}
	o.mu.Unlock()
	container, err := o.serverContainer(kc, k)
	if err != nil {
		return err
	}
	obj := kube.ClockOffset(o.name(), o.run, kube.Pod{Namespace: k.Namespace, Name: k.Pod}, container, cs.total+d)
	c, err := o.inject(kc, kube.TimeChaosResource, obj, fmt.Sprintf("%s's clock %+v", name, cs.total+d))
	if err != nil {
		return err
	}
	if cs.obj != nil {
		if err := cs.obj.Undo(); err != nil {
			return errors.Join(err, c.Undo())
		}
	}
	cs.total += d
	cs.obj = c
	return nil
}

// serverContainer is the pod's first container that is not the agent:
// the one a TimeChaos moves the clock of.
func (o *onKube) serverContainer(kc *kube.Client, k *control.Kubernetes) (string, error) {
	return kc.FirstContainer(context.Background(), kube.Pod{Namespace: k.Namespace, Name: k.Pod}, k.AgentName())
}

// release leaves a controlled server running and resumed (waiting for a
// pod a fault deleted to come back), and stops watching it.
func (o *onKube) release(s *Server) error {
	ctl, err := o.controlled(s)
	if err != nil {
		return nil
	}
	p := s.Process()
	var errs []error
	if !p.Alive() {
		if kc, err := o.client(ctl.Kubernetes); err != nil {
			errs = append(errs, err)
		} else if np, err := o.find(context.Background(), s, kc, ctl, 2*time.Minute); err != nil {
			errs = append(errs, err)
		} else {
			p = procgroup.NewRemote(s.Spec.Name, np)
		}
	} else if stopped, err := p.Stopped(); err == nil && stopped {
		errs = append(errs, p.Signal(syscall.SIGCONT))
	}
	p.Detach()
	return errors.Join(errs...)
}

// close deletes every Chaos Mesh object of the run (which recovers its
// pods: rules removed, clocks set right).
func (o *onKube) close() error {
	o.mu.Lock()
	made := o.made
	o.made = nil
	o.mu.Unlock()
	var errs []error
	for _, c := range made {
		errs = append(errs, c.Undo())
	}
	return errors.Join(errs...)
}
