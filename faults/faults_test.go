package faults_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"
)

// testEnv is a faults.Env over a real in-process toxiproxy and real child
// processes.
type testEnv struct {
	toxi    *cluster.Toxi
	procs   map[string]*cluster.Process
	servers map[string]string // name -> real address (or IP)
	peers   map[string][]string
	fw      *cluster.Firewall
}

func (e *testEnv) Link(name string) (*toxiclient.Proxy, error) { return e.toxi.Client.Proxy(name) }
func (e *testEnv) Signal(target string, sig syscall.Signal) error {
	p := e.procs[target]
	if p == nil {
		return fmt.Errorf("no %s", target)
	}
	return p.Signal(sig)
}
func (e *testEnv) Kill(target string) error { return e.procs[target].Kill(5 * time.Second) }
func (e *testEnv) Server(name string) (string, string, error) {
	if a, ok := e.servers[name]; ok {
		return a, "redis", nil
	}
	return "", "", fmt.Errorf("no server %s", name)
}
func (e *testEnv) Peers(name string) []string { return e.peers[name] }
func (e *testEnv) Cut(from, to string) (func() error, error) {
	return e.fw.Drop(e.servers[from], e.servers[to])
}
func (e *testEnv) Restart(context.Context, string) error {
	return errors.New("restart is not supported in this test")
}

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func newEnv(t *testing.T) (*testEnv, string) {
	t.Helper()
	toxi, err := cluster.StartToxi()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { toxi.Close() })
	p, err := toxi.Proxy("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{toxi: toxi, procs: map[string]*cluster.Process{}, servers: map[string]string{}}, p.Listen
}

func build(t *testing.T, typ, opts string) faults.Fault {
	t.Helper()
	info, err := faults.Lookup(typ)
	if err != nil {
		t.Fatal(err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(opts), &n); err != nil {
		t.Fatal(err)
	}
	f, err := info.New(func(v any) error {
		if len(n.Content) == 0 {
			return nil
		}
		dec := yaml.NewDecoder(strings.NewReader(opts))
		dec.KnownFields(true)
		return dec.Decode(v)
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// roundTrip sends one line and waits for its echo; it returns the time it
// took, or an error (refused, timed out).
func roundTrip(addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		return 0, fmt.Errorf("echo returned %q", line)
	}
	return time.Since(start), nil
}

func TestLatency(t *testing.T) {
	env, addr := newEnv(t)
	heal, err := build(t, "latency", "latency: 150ms\njitter: 0ms\ndirection: upstream").Start(context.Background(), env, "link:echo")
	if err != nil {
		t.Fatal(err)
	}
	// A lower bound only: a delay fault can never make the trip faster.
	if d, err := roundTrip(addr, 5*time.Second); err != nil || d < 150*time.Millisecond {
		t.Errorf("round trip under latency: %v %v, want >= 150ms", d, err)
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	toxics, err := mustProxy(t, env).Toxics()
	if err != nil || len(toxics) != 0 {
		t.Errorf("toxics left after heal: %v %v", toxics, err)
	}
}

func mustProxy(t *testing.T, env *testEnv) *toxiclient.Proxy {
	p, err := env.Link("echo")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPartitionRefusesThenHeals(t *testing.T) {
	env, addr := newEnv(t)
	heal, err := build(t, "partition", "").Start(context.Background(), env, "link:echo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(addr, time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("round trip during partition: %v, want connection refused", err)
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(addr, 2*time.Second); err != nil {
		t.Errorf("after heal: %v", err)
	}
}

func TestDropHangsSilently(t *testing.T) {
	env, addr := newEnv(t)
	heal, err := build(t, "drop", "").Start(context.Background(), env, "link:echo")
	if err != nil {
		t.Fatal(err)
	}
	_, err = roundTrip(addr, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("round trip during drop: %v, want a timeout (no reset, no refusal)", err)
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(addr, 2*time.Second); err != nil {
		t.Errorf("after heal: %v", err)
	}
}

func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "gone"
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

func sleeper(t *testing.T) *cluster.Process {
	t.Helper()
	p, err := cluster.StartProcess("sleeper", "test", exec.Command("sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(5 * time.Second) })
	return p
}

func TestPauseStopsAndResumes(t *testing.T) {
	env, _ := newEnv(t)
	p := sleeper(t)
	env.procs["instance-1"] = p
	heal, err := build(t, "pause", "").Start(context.Background(), env, "instance-1")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, p.Pid(), "T")
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.Pid(), "S")
}

func TestKillInstance(t *testing.T) {
	env, _ := newEnv(t)
	p := sleeper(t)
	env.procs["instance-1"] = p
	heal, err := build(t, "kill", "").Start(context.Background(), env, "instance-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Alive() {
		t.Error("killed process is alive")
	}
	if err := heal(context.Background()); err != nil {
		t.Errorf("an instance is not restarted, heal must be a no-op: %v", err)
	}
}

func TestFaultOnMissingTargetFails(t *testing.T) {
	env, _ := newEnv(t)
	if _, err := build(t, "pause", "").Start(context.Background(), env, "instance-9"); err == nil {
		t.Error("pause of a missing instance succeeded")
	}
	if _, err := build(t, "partition", "").Start(context.Background(), env, "link:nope"); err == nil {
		t.Error("partition of a missing link succeeded")
	}
}

func TestBadOptions(t *testing.T) {
	for _, tt := range []struct{ typ, opts string }{
		{"latency", "jitter: 5ms"},
		{"latency", "latency: 5ms\ndirection: sideways"},
		{"drop", "direction: up"},
		{"pause", "length: 3s"},
	} {
		info, _ := faults.Lookup(tt.typ)
		_, err := info.New(func(v any) error {
			dec := yaml.NewDecoder(strings.NewReader(tt.opts))
			dec.KnownFields(true)
			return dec.Decode(v)
		})
		if err == nil {
			t.Errorf("%s with %q accepted", tt.typ, tt.opts)
		}
	}
}

func waitState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for procState(pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("process %d state %s, want %s", pid, procState(pid), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBandwidthSlicerResetPeer(t *testing.T) {
	env, addr := newEnv(t)
	for _, tt := range []struct {
		typ, opts string
		broken    bool // the round trip must fail while the fault is on
	}{
		{"bandwidth", "rate: 1", false},
		{"slicer", "average_size: 2\nsize_variation: 1\ndelay: 1ms", false},
		{"reset-peer", "after: 0s", true},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			heal, err := build(t, tt.typ, tt.opts).Start(context.Background(), env, "link:echo")
			if err != nil {
				t.Fatal(err)
			}
			_, err = roundTrip(addr, 2*time.Second)
			if tt.broken && err == nil {
				t.Errorf("round trip succeeded through %s", tt.typ)
			}
			if !tt.broken && err != nil {
				t.Errorf("round trip through %s failed: %v", tt.typ, err)
			}
			if err := heal(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := roundTrip(addr, 2*time.Second); err != nil {
				t.Errorf("after heal: %v", err)
			}
		})
	}
}

// TestClockJumpShortensLeases runs the emulated jump on a real redis-server.
func TestClockJumpShortensLeases(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (make setup): %v", err)
	}
	cl, err := cluster.New("clocktest", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Start(context.Background(), []backends.ServerSpec{{Kind: "redis", Name: "redis-1"}}); err != nil {
		t.Fatal(err)
	}
	addr := cl.Server("redis-1").Addr
	env := &testEnv{toxi: cl.Toxi, servers: map[string]string{"redis-1": addr}}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	c.Set(ctx, "lockbench:lock:a", "x", 10*time.Second)
	c.Set(ctx, "lockbench:lock:b", "y", 2*time.Second)
	c.Set(ctx, "lockbench:lock:forever", "z", 0)
	c.Set(ctx, "other", "w", 10*time.Second)
	if _, err := build(t, "clock-jump", "jump: 3s").Start(ctx, env, "redis-1"); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, "lockbench:lock:a").Val(); ttl > 7*time.Second || ttl < 6*time.Second {
		t.Errorf("a: PTTL %s after a 3s jump from 10s, want about 7s", ttl)
	}
	if n := c.Exists(ctx, "lockbench:lock:b").Val(); n != 0 {
		t.Errorf("b had 2s left: a 3s jump must expire it")
	}
	if n := c.Exists(ctx, "lockbench:lock:forever").Val(); n != 1 {
		t.Errorf("a key without TTL must survive a clock jump")
	}
	if ttl := c.PTTL(ctx, "other").Val(); ttl < 9*time.Second {
		t.Errorf("a non-lock key was touched: PTTL %s", ttl)
	}
}
