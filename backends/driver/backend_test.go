package driver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
)

func newTestBackend(label, opts string) (*Backend, error) {
	b, err := New(label, func(v any) error { return config.DecodeStrictBytes([]byte(opts), v, 0) })
	if err != nil {
		return nil, err
	}
	return b.(*Backend), nil
}

// TestNew: what a driver case may say, and what it is refused.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name, label, opts string
		want              string // "" for valid; else a fragment of the error
	}{
		{"reference", "redis-py@4.3.4", "{}", ""},
		{"reference without version", "kazoo", "{}", ""},
		{"reference with library options", "kazoo", "{library: {timeout: 2}}", ""},
		{"unknown library option", "kazoo", "{library: {tmeout: 2}}", "kazoo takes no option tmeout (it takes: lost_on, timeout)"},
		{"own driver", "mine@1", "{server: etcd, command: [./d]}", ""},
		{"own driver, no server", "mine", "{command: [./d]}", "server: required"},
		{"own driver, unknown server", "mine", "{server: mysql, command: [./d]}", `server: "mysql" is not one of consul, etcd, postgres, redis`},
		{"no command, no reference", "mine", "{server: redis}", `"mine" is not a reference driver (redis-py, kazoo, python-etcd3, curator, node-redis)`},
		{"no label, no command", "", "{}", "name a reference driver in the backend's label"},
		{"reference on another server", "kazoo", "{server: redis}", "the reference driver kazoo talks to zookeeper, not redis"},
		{"server options", "mine", "{server: zookeeper, server_options: {members: 1}, command: [./d]}", ""},
		{"bad server options", "mine", "{server: zookeeper, server_options: {members: 9}, command: [./d]}", "members: 9 is outside 1..7"},
		{"bad acquire", "kazoo", "{acquire: sometimes}", `acquire: "sometimes" is neither wait nor try`},
		{"bad lease", "mine", "{server: redis, lease: forever, command: [./d]}", `lease: "forever" is not ttl, none or a positive duration`},
		{"dials a server it does not have", "mine", "{server: redis, dials: [etcd-1], command: [./d]}", "dials: etcd-1 is not a server of redis"},
		{"bad label", "a@b@c", "{}", "want LIBRARY or LIBRARY@VERSION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTestBackend(tc.label, tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

// TestDeclared: what the coordinator knows of a driver before it runs,
// from its reference or its options.
func TestDeclared(t *testing.T) {
	ttl := 2 * time.Second
	for _, tc := range []struct {
		label, opts            string
		fenced, extend, renews bool
		one                    bool
		lease                  time.Duration
		dials                  string
	}{
		{"redis-py", "{}", false, true, false, false, ttl, "redis-1"},
		{"redis-py", "{library: {timeout: null}}", false, true, false, false, 0, "redis-1"},
		{"redis-py", "{library: {timeout: 5}}", false, true, false, false, 5 * time.Second, "redis-1"},
		// kazoo asks 10s; the ensemble's tick (500ms) bounds it to 10s.
		{"kazoo", "{}", false, false, true, true, 10 * time.Second, "zookeeper-1,zookeeper-2,zookeeper-3"},
		{"kazoo", "{library: {timeout: 0.5}}", false, false, true, true, time.Second, "zookeeper-1,zookeeper-2,zookeeper-3"},
		// Curator asks 60s: bounded to 20 ticks.
		{"curator", "{}", false, false, true, true, 10 * time.Second, "zookeeper-1,zookeeper-2,zookeeper-3"},
		{"curator", "{library: {session_timeout_ms: 3000}, server_options: {tick_time: 1s}}", false, false, true, true, 3 * time.Second, "zookeeper-1,zookeeper-2,zookeeper-3"},
		{"python-etcd3", "{}", false, true, false, false, ttl, "etcd-1"},
		{"node-redis", "{}", true, true, true, false, ttl, "redis-1"},
		{"node-redis", "{library: {fencing: false, renew_every_ms: 0}}", false, true, false, false, ttl, "redis-1"},
		{"mine", "{server: redis, command: [d], tokens: true, extend: true, lease: 3s}", true, true, false, false, 3 * time.Second, "redis-1"},
		{"mine", "{server: postgres, command: [d], lease: none}", false, false, false, false, 0, "postgres-1"},
	} {
		b, err := newTestBackend(tc.label, tc.opts)
		if err != nil {
			t.Errorf("%s %s: %v", tc.label, tc.opts, err)
			continue
		}
		got := []any{b.Fenced(), b.CanExtend(), b.RenewsInBackground(), b.OneMember(), b.LeaseTime(ttl), strings.Join(b.Dials(1, 2), ",")}
		want := []any{tc.fenced, tc.extend, tc.renews, tc.one, tc.lease, tc.dials}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s %s: [fenced extend renews one lease dials] = %v, want %v", tc.label, tc.opts, got, want)
				break
			}
		}
	}
}

// TestAgree: the driver's hello must be what the case declared and named.
func TestAgree(t *testing.T) {
	hello := func(lib, ver string, ab Abilities) Reply {
		return Reply{Type: TypeHello, Protocol: 1, Library: lib, Version: ver, Abilities: &ab}
	}
	b, _ := newTestBackend("redis-py@4.3.4", "{}")
	ab := Abilities{Extend: true, Acquire: []string{"wait", "try"}, Concurrent: true}
	for _, tc := range []struct {
		h    Reply
		want string
	}{
		{hello("redis-py", "4.3.4", ab), ""},
		{hello("redis-py", "5.0.1", ab), "the case names redis-py@4.3.4, but the driver says it is redis-py 5.0.1"},
		{hello("kazoo", "4.3.4", ab), "the case names library redis-py, but the driver says it is kazoo 4.3.4"},
		{hello("redis-py", "4.3.4", Abilities{Acquire: []string{"wait"}}), "the case declares extension"},
		{hello("redis-py", "4.3.4", Abilities{Extend: true, Token: true, Acquire: []string{"wait"}}), "set tokens: true"},
	} {
		err := b.Agree(tc.h)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %s: %v, want %q", tc.h.Library, tc.h.Version, err, tc.want)
		}
	}
	py, _ := newTestBackend("python-etcd3", "{acquire: wait}")
	if err := py.Agree(hello("python-etcd3", "0.12.0", Abilities{Extend: true, Acquire: []string{"try"}})); err == nil || !strings.Contains(err.Error(), "acquire: wait, but the driver offers only try") {
		t.Errorf("acquire mode not offered: %v", err)
	}
}

// TestRegistered: the backend is registered under driver, takes labels,
// and is refused by name with a label only where registered.
func TestRegistered(t *testing.T) {
	b, err := backends.New("driver:redis-py@4.3.4", func(v any) error { return config.DecodeStrictBytes([]byte("{}"), v, 0) })
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Servers()) != 1 || b.Servers()[0].Kind != "redis" {
		t.Errorf("servers %v", b.Servers())
	}
	if _, err := backends.New("redis:x", func(any) error { return nil }); err == nil || !strings.Contains(err.Error(), "takes no label") {
		t.Errorf("a label on redis: %v", err)
	}
	if _, err := backends.New("driver:", func(any) error { return nil }); err == nil || !strings.Contains(err.Error(), "empty label") {
		t.Errorf("an empty label: %v", err)
	}
}

// TestOptionsDocumented: bench list shows every driver option with its
// type and a description that names its default.
func TestOptionsDocumented(t *testing.T) {
	info, err := backends.Lookup("driver:anything")
	if err != nil {
		t.Fatal(err)
	}
	opts := info.OptionList()
	if len(opts) < 10 {
		t.Fatalf("%d options listed", len(opts))
	}
	for _, o := range opts {
		if o.Doc == "" || o.Type == "" || !strings.Contains(o.Doc, "default") {
			t.Errorf("option %s: type %q, doc %q: want both, the doc naming its default", o.Name, o.Type, o.Doc)
		}
	}
}

// TestOwnDriverFindsTheHelpers: a driver of one's own is told where
// lockbench's protocol helpers are (LOCKBENCH_DRIVERS, a folder holding
// python/lockbench_driver.py), beside the env its case declares.
func TestOwnDriverFindsTheHelpers(t *testing.T) {
	b, err := newTestBackend("mine@1", "{server: redis, command: [./d], env: {A: b}}")
	if err != nil {
		t.Fatal(err)
	}
	_, env, err := b.Command()
	if err != nil {
		t.Fatal(err)
	}
	var dir string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvDrivers+"="); ok {
			dir = v
		}
	}
	if dir == "" || !slices.Contains(env, "A=b") {
		t.Fatalf("env %q: want %s=<folder> and A=b", env, EnvDrivers)
	}
	if _, err := os.Stat(filepath.Join(dir, "python", "lockbench_driver.py")); err != nil {
		t.Errorf("%s=%s holds no Python helper: %v", EnvDrivers, dir, err)
	}
}

// TestCycleFollowsTheServerKind: a driver's trials spread their faults
// over its lock's own cycle, by the rule of its server kind's backend on
// the driver's lease (docs/scenarios.md): a third of a ZooKeeper session,
// half a Consul session, an etcd lease, else the lease; its expiry bound
// is twice an etcd lease (a new leader renews it whole), else the lease.
func TestCycleFollowsTheServerKind(t *testing.T) {
	ttl := 2 * time.Second
	for _, tc := range []struct {
		label, opts   string
		cycle, expiry time.Duration
	}{
		{"kazoo", "{library: {timeout: 6}}", 2 * time.Second, 6 * time.Second},
		{"curator", "{}", 10 * time.Second / 3, 10 * time.Second}, // 60 s asked, 20 ticks of 500 ms granted
		{"mine", "{server: zookeeper, lease: 9s, command: [./d]}", 3 * time.Second, 9 * time.Second},
		{"mine", "{server: consul, lease: 10s, command: [./d]}", 5 * time.Second, 10 * time.Second},
		{"python-etcd3", "{}", 2 * time.Second, 4 * time.Second},
		{"redis-py", "{}", ttl, ttl},
		{"mine", "{server: redis, lease: none, command: [./d]}", 0, 0},
	} {
		b, err := newTestBackend(tc.label, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if c, e := backends.Cycle(b, ttl), backends.ExpiryBound(b, ttl); c != tc.cycle || e != tc.expiry {
			t.Errorf("%s %s: cycle %s, expiry bound %s; want %s, %s", tc.label, tc.opts, c, e, tc.cycle, tc.expiry)
		}
	}
}
