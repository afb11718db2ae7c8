package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/scenario"
)

// fakeCluster is a faultCluster with no server behind it: servers are
// names with a kind, an address and a state; what the faults ask of it is
// recorded in calls, and err, when set, is what every action returns.
type fakeCluster struct {
	mu      sync.Mutex
	order   []string
	servers map[string]*serverInfo
	stopped map[string]bool
	leader  string
	relays  map[string]links.Counts
	proxies map[string]bool
	calls   []string
	err     error
}

func newFakeCluster(servers ...string) *fakeCluster {
	f := &fakeCluster{servers: map[string]*serverInfo{}, stopped: map[string]bool{}, relays: map[string]links.Counts{}, proxies: map[string]bool{}}
	for i, name := range servers {
		kind, _, _ := strings.Cut(name, "-")
		f.order = append(f.order, name)
		f.servers[name] = &serverInfo{Kind: kind, Addr: fmt.Sprintf("127.9.0.%d:7000", 10+i), IP: fmt.Sprintf("127.9.0.%d", 10+i), Alive: true}
	}
	return f
}

func (f *fakeCluster) record(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return f.err
}

// called lists the recorded calls, joined for matching.
func (f *fakeCluster) called() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

func (f *fakeCluster) Names() []string { return append([]string(nil), f.order...) }
func (f *fakeCluster) Server(name string) (serverInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[name]
	if !ok {
		return serverInfo{}, false
	}
	return *s, true
}
func (f *fakeCluster) Stopped(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped[name], nil
}
func (f *fakeCluster) Leader(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leader == "" {
		return "", errors.New("no leader")
	}
	return f.leader, nil
}
func (f *fakeCluster) Proxy(link string) (*toxiclient.Proxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.proxies[link] {
		return nil, fmt.Errorf("no proxy %s", link)
	}
	return &toxiclient.Proxy{Name: link}, nil
}
func (f *fakeCluster) RelayCounts(link string) (links.Counts, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.relays[link]
	return c, ok
}
func (f *fakeCluster) Signal(name string, sig syscall.Signal) error {
	f.mu.Lock()
	switch sig {
	case syscall.SIGSTOP:
		f.stopped[name] = true
	case syscall.SIGCONT:
		f.stopped[name] = false
	}
	f.mu.Unlock()
	return f.record("signal %s %d", name, sig)
}
func (f *fakeCluster) Kill(name string) error {
	f.mu.Lock()
	f.servers[name].Alive = false
	f.mu.Unlock()
	return f.record("kill %s", name)
}
func (f *fakeCluster) Restart(_ context.Context, name string) error {
	f.mu.Lock()
	f.servers[name].Alive = true
	f.mu.Unlock()
	return f.record("restart %s", name)
}
func (f *fakeCluster) ServerEndpoint(name string) (firewall.Endpoint, error) {
	s, ok := f.Server(name)
	if !ok {
		return firewall.Endpoint{}, fmt.Errorf("no server %s", name)
	}
	return firewall.Endpoint{IP: s.IP}, nil
}
func (f *fakeCluster) InstanceEndpoint(n int) firewall.Endpoint {
	return firewall.Endpoint{IP: f.InstanceIP(n), Mark: 0x4c000000 | n}
}
func (f *fakeCluster) InstanceIP(n int) string { return fmt.Sprintf("127.9.1.%d", n) }
func (f *fakeCluster) DropSome(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	if err := f.record("drop %s %s %s %s %g", a, b, a.Proto, b.Proto, p); err != nil {
		return nil, err
	}
	return fakeCut{}, nil
}

// fakeCut is a rule in force that dropped one packet.
type fakeCut struct{}

func (fakeCut) Packets() (int64, error) { return 1, nil }
func (fakeCut) Undo() error             { return nil }

// fullCluster is a fakeCluster with every optional ability.
type fullCluster struct{ *fakeCluster }

func (f fullCluster) Shape(ip string, to []string, delay, jitter time.Duration, loss float64) (firewall.Cut, error) {
	return fakeCut{}, f.record("shape %s to %v delay %s jitter %s loss %g", ip, to, delay, jitter, loss)
}
func (f fullCluster) Confine(name, ctrl string, settings [][2]string) (cgroup.Confined, error) {
	return nil, f.record("confine %s %s %v", name, ctrl, settings)
}
func (f fullCluster) DataDevice(name string) (string, error) {
	return "8:1", f.record("device %s", name)
}
func (f fullCluster) JumpClock(name string, d time.Duration) error {
	return f.record("jump %s %s", name, d)
}
func (f fullCluster) DriftClock(name string, rate float64) error {
	return f.record("drift %s %g", name, rate)
}
func (f fullCluster) DiskFull(name string, full bool) (int64, error) {
	return 7, f.record("disk-full %s %v", name, full)
}
func (f fullCluster) DiskRefused(name string) (int64, error) { return 3, f.record("refused %s", name) }
func (f fullCluster) PowerLoss(name string) (powerfs.Loss, error) {
	return powerfs.Loss{Bytes: 10, Files: 2}, f.record("power-loss %s", name)
}

// testCase is a case in progress over a fake cluster: its history and
// faults.jsonl go to buffers.
type testCase struct {
	*caseRun
	fc      *fakeCluster
	history bytes.Buffer
	records bytes.Buffer
	log     bytes.Buffer
}

func newTestCase(t *testing.T, fc *fakeCluster) *testCase {
	t.Helper()
	tc := &testCase{fc: fc}
	r := &run{sc: &scenario.Scenario{Name: "t"}, log: &tc.log, base: monoclock.Now()}
	r.m = newMerger(history.NewWriter(&tc.history), r.base)
	r.faults = json.NewEncoder(&tc.records)
	tc.caseRun = &caseRun{r: r, c: &scenario.Case{Name: "c"}, acts: fc, workers: map[history.Instance]*workerProc{},
		waiting: map[string]bool{}, storing: map[string]string{}, storeSince: map[string]int64{}, served: map[string]int64{}}
	tc.start = monoclock.Since(r.base)
	return tc
}

// worker adds instance n, a real process (sleep) with routes to the
// servers named (direct), and to the resource.
func (tc *testCase) worker(t *testing.T, n history.Instance, servers ...string) *workerProc {
	t.Helper()
	p, err := procgroup.StartProcess(n.String(), "runner-test", exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(5 * time.Second) })
	w := &workerProc{n: n, name: n.String(), proc: p, done: make(chan struct{})}
	for _, s := range servers {
		si, _ := tc.fc.Server(s)
		w.routes = append(w.routes, links.Route{Name: s, Addr: si.Addr})
	}
	w.routes = append(w.routes, links.Route{Name: links.Resource, Addr: "127.9.0.1:5000"})
	tc.workers[n] = w
	return w
}

// faultRecords reads what runFault wrote to faults.jsonl.
func (tc *testCase) faultRecords(t *testing.T) []layout.Fault {
	t.Helper()
	var out []layout.Fault
	dec := json.NewDecoder(bytes.NewReader(tc.records.Bytes()))
	for dec.More() {
		var r layout.Fault
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// marks lists the fault marks written to the history, as "f target err".
func (tc *testCase) marks(t *testing.T) []string {
	t.Helper()
	if err := tc.r.m.flush(true); err != nil {
		t.Fatal(err)
	}
	var out []string
	rd := history.NewReader(bytes.NewReader(tc.history.Bytes()), "history")
	for rd.Next() {
		e := rd.Event()
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s", e.F, e.Target, e.Err)))
	}
	if rd.Err() != nil {
		t.Fatal(rd.Err())
	}
	return out
}

// scripted is a fault whose every step is told: Start fails with the
// errors of start in turn (then succeeds), Check says check (or fails
// with checkErr), Heal fails with healErr.
type scripted struct {
	start    []error
	check    string
	checkErr error
	healErr  error

	mu      sync.Mutex
	hit     []faults.Target
	healed  int
	checked int
}

func (s *scripted) Start(_ context.Context, _ faults.Env, t faults.Target) (*faults.Effect, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hit = append(s.hit, t)
	if len(s.start) > 0 {
		err := s.start[0]
		s.start = s.start[1:]
		if err != nil {
			return nil, err
		}
	}
	return &faults.Effect{Seen: "hit " + t.String(),
		Check: func(context.Context) (string, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.checked++
			return s.check, s.checkErr
		},
		Heal: func(context.Context) (string, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.healed++
			if s.healErr != nil {
				return "", s.healErr
			}
			return "healed " + t.String(), nil
		}}, nil
}

// fault is a scheduled fault of type typ on the targets written, at once,
// for a moment.
func fault(typ string, f faults.Fault, targets ...string) *scenario.Fault {
	sf := &scenario.Fault{Name: typ + "-1", Type: typ, For: 10 * time.Millisecond, Fault: f}
	for _, t := range targets {
		sf.Targets = append(sf.Targets, faults.ParseTarget(t))
	}
	return sf
}

// instance is n as a history.Instance, for loops over ints.
func (tc *testCase) instance(n int) history.Instance { return history.Instance(n) }
