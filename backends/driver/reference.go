package driver

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/drivers"
)

// Reference is a driver shipped in drivers/, with what a run must know of
// it before it starts: its server, and what its library does by default
// (the library options a scenario gives can change some of it).
type Reference struct {
	Name    string // the label's library, and what the driver's hello says
	Summary string
	Package string // the Debian package of the library
	Server  string // the Go backend whose cluster it talks to
	Acquire string // the library's own acquisition mode
	Extend  bool
	// OneMember: the library keeps one session on one member at a time.
	OneMember bool
	Dials     []string // the servers it connects to; nil: all
	// Options are the library options the driver takes, each with its
	// default as the driver applies it.
	Options map[string]string
	// Quick are the backend options `bench driver check` runs it with
	// when given none: one server member, a short session (the check is of
	// the driver, and must not wait out a library's minute-long default).
	Quick map[string]any

	tokens  func(lib map[string]any) bool
	renews  func(lib map[string]any) bool
	lease   func(lib map[string]any, servers []backends.ServerSpec, ttl time.Duration) time.Duration
	command func() ([]string, []string, error)
	// Runtime is the language runtime the driver runs on (python, node,
	// java): `bench driver perf` measures a bare echo of the same one.
	Runtime string
}

// EchoCommand is the bare echo (drivers/*/echo.*) of a runtime: a line
// read, the same line written back, read and written as that runtime's
// protocol helper does, on the interpreter the reference drivers use.
func EchoCommand(runtime string) ([]string, []string, error) {
	dir, err := drivers.Dir()
	if err != nil {
		return nil, nil, err
	}
	switch runtime {
	case "python":
		return []string{python, filepath.Join(dir, "python", "echo.py")}, nil, nil
	case "node":
		return []string{"node", filepath.Join(dir, "node", "echo.js")}, nil, nil
	case "java":
		classes, err := drivers.JavaClasses()
		if err != nil {
			return nil, nil, err
		}
		return []string{"java", "-cp", classes, "Echo"}, nil, nil
	}
	return nil, nil, fmt.Errorf("no bare echo for the runtime %q", runtime)
}

// Tokens says whether leases carry fencing tokens with these options.
func (r Reference) Tokens(lib map[string]any) bool { return r.tokens != nil && r.tokens(lib) }

// Renews says whether the library renews in the background with these
// options.
func (r Reference) Renews(lib map[string]any) bool { return r.renews != nil && r.renews(lib) }

// Lease is what bounds a grant on the server with these options.
func (r Reference) Lease(lib map[string]any, servers []backends.ServerSpec, ttl time.Duration) time.Duration {
	if r.lease == nil {
		return ttl
	}
	return r.lease(lib, servers, ttl)
}

// Check refuses library options the driver does not take (the driver
// refuses them too, at its start; this says so at validation).
func (r Reference) Check(lib map[string]any) error {
	var unknown []string
	for k := range lib {
		if _, ok := r.Options[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(r.Options))
		for k := range r.Options {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Errorf("%s takes no option %s (it takes: %s)", r.Name, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}

// python is Debian's interpreter, where the python3-* packages live (a
// python3 earlier on the PATH, pyenv's say, would not find them).
const python = "/usr/bin/python3"

func pythonDriver(file string) func() ([]string, []string, error) {
	return func() ([]string, []string, error) {
		dir, err := drivers.Dir()
		if err != nil {
			return nil, nil, err
		}
		return []string{python, filepath.Join(dir, "python", file)}, nil, nil
	}
}

// References are the reference drivers, by name.
var References = []Reference{
	{
		Name:    "redis-py",
		Summary: "redis-py's Lock (SET NX PX, Lua compare-and-delete release, extend by Lua); no token, no lost signal",
		Package: "python3-redis", Server: "redis", Acquire: AcquireWait, Extend: true,
		Options: map[string]string{
			"timeout":         "the lock's timeout in seconds; null: none (default: the workload's ttl)",
			"sleep":           "seconds between tries of a blocking acquire (default 0.1)",
			"thread_local":    "keep the token in thread-local storage (default true)",
			"extend":          "replace (extend(ttl, replace_ttl=True), the default here), add (extend(ttl): the library's default) or reacquire",
			"socket_timeout":  "seconds a command may wait for its reply; null: forever (default null, redis-py's)",
			"release_retries": "retries of a release that failed on the connection, once a second, as an application's retry would (default 0)",
			"share":           "none (a Lock per acquisition, the default), threads (one redis.lock.Lock per key shared by the instance's clients, each a thread) or tasks (one redis.asyncio.lock.Lock per key shared by the clients, each an asyncio task of one event loop)",
		},
		lease: func(lib map[string]any, _ []backends.ServerSpec, ttl time.Duration) time.Duration {
			if v, ok := lib["timeout"]; ok {
				if v == nil {
					return 0
				}
				if s, ok := number(v); ok {
					return time.Duration(s * float64(time.Second))
				}
			}
			return ttl
		},
		command: pythonDriver("redis_lock.py"), Runtime: "python",
	},
	{
		Name:    "kazoo",
		Summary: "kazoo's Lock (ephemeral sequential node, watch the predecessor); lost on the session's LOST state; no token",
		Package: "python3-kazoo", Server: "zookeeper", Acquire: AcquireWait, OneMember: true,
		Options: map[string]string{
			"timeout": "the session timeout asked for, in seconds (default 10.0, kazoo's; the server bounds it to 2-20 ticks)",
			"lost_on": "lost (the session is gone: the library's advice, default) or suspended (the connection dropped)",
		},
		renews: func(map[string]any) bool { return true },
		lease: func(lib map[string]any, servers []backends.ServerSpec, _ time.Duration) time.Duration {
			asked := 10 * time.Second
			if s, ok := number(lib["timeout"]); ok {
				asked = time.Duration(s * float64(time.Second))
			}
			return zkSession(asked, servers)
		},
		Quick:   map[string]any{"server_options": map[string]any{"members": 1}, "library": map[string]any{"timeout": 2}},
		command: pythonDriver("kazoo_lock.py"), Runtime: "python",
	},
	{
		Name:    "python-etcd3",
		Summary: "python-etcd3's Lock (a lease of whole seconds, a transaction on the key's create revision); extend = lease refresh; no token, no lost signal; one endpoint",
		// Tries once: the blocking acquire of 0.12.0 raises TypeError when it
		// has to wait, with Debian 12's tenacity 8.2 (kragniz/python-etcd3
		// #2149); acquire: wait shows it.
		Package: "python3-etcd3", Server: "etcd", Acquire: AcquireTry, Extend: true,
		Dials: []string{"etcd-1"},
		Options: map[string]string{
			"ttl":             "the lock's lease in whole seconds (default: the workload's ttl, rounded up)",
			"timeout":         "seconds a gRPC call may take; null: forever (default null, the library's)",
			"context_manager": "acquire as `with client.lock(...)` does: __enter__, the library's 10 s acquire whose result is not looked at (default false)",
		},
		lease: func(lib map[string]any, _ []backends.ServerSpec, ttl time.Duration) time.Duration {
			if s, ok := number(lib["ttl"]); ok {
				return time.Duration(s) * time.Second
			}
			return ceilSeconds(ttl)
		},
		Quick:   map[string]any{"server_options": map[string]any{"members": 1}},
		command: pythonDriver("etcd3_lock.py"), Runtime: "python",
	},
	{
		Name:    "curator",
		Summary: "Apache Curator's InterProcessMutex (protected ephemeral sequential node); lost on the LOST connection state; no token",
		Package: "libcurator-recipes-java", Server: "zookeeper", Acquire: AcquireWait, OneMember: true,
		Options: map[string]string{
			"session_timeout_ms":    "the session timeout asked for (default 60000, Curator's; the server bounds it to 2-20 ticks)",
			"connection_timeout_ms": "how long a connection attempt may take (default 15000, Curator's)",
			"lost_on":               "lost (the session is gone: Curator's advice, default) or suspended (the connection dropped)",
		},
		Quick:  map[string]any{"server_options": map[string]any{"members": 1}, "library": map[string]any{"session_timeout_ms": 2000}},
		renews: func(map[string]any) bool { return true },
		lease: func(lib map[string]any, servers []backends.ServerSpec, _ time.Duration) time.Duration {
			asked := 60 * time.Second
			if ms, ok := number(lib["session_timeout_ms"]); ok {
				asked = time.Duration(ms) * time.Millisecond
			}
			return zkSession(asked, servers)
		},
		command: func() ([]string, []string, error) {
			classes, err := drivers.JavaClasses()
			if err != nil {
				return nil, nil, err
			}
			cp := strings.Join(append([]string{classes}, drivers.JavaClassPath...), ":")
			return []string{"java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "CuratorDriver"}, nil, nil
		},
		Runtime: "java",
	},
	{
		Name:    "node-redis",
		Summary: "the seeds' TypeScript lease on node-redis: SET NX PX, INCR token, a renew timer every ttl/2, Lua compare-and-delete release and compare-and-pexpire extend",
		Package: "node-redis", Server: "redis", Acquire: AcquireTry, Extend: true,
		Options: map[string]string{
			"fencing":        "INCR a per-key counter after each acquisition, the seeds' fencing token (default true)",
			"renew_every_ms": "renew the lease on a timer this often; 0: never (default: ttl/2, the seeds' withLease)",
		},
		tokens: func(lib map[string]any) bool {
			v, ok := lib["fencing"].(bool)
			return !ok || v
		},
		renews: func(lib map[string]any) bool {
			ms, ok := number(lib["renew_every_ms"])
			return !ok || ms > 0
		},
		command: func() ([]string, []string, error) {
			dir, err := drivers.Dir()
			if err != nil {
				return nil, nil, err
			}
			// Debian's node-* packages live in /usr/share/nodejs, which
			// Debian's nodejs searches and another node (NodeSource's)
			// does not.
			return []string{"node", filepath.Join(dir, "node", "lease.js")}, []string{"NODE_PATH=/usr/share/nodejs:/usr/lib/nodejs"}, nil
		},
		Runtime: "node",
	},
}

// LookupReference returns the reference driver named name.
func LookupReference(name string) (*Reference, error) {
	var names []string
	for i := range References {
		if References[i].Name == name {
			return &References[i], nil
		}
		names = append(names, References[i].Name)
	}
	if name == "" {
		return nil, fmt.Errorf("give options.command, or name a reference driver in the backend's label (driver:NAME@VERSION; references: %s)", strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("%q is not a reference driver (%s): give options.command to run a driver of your own", name, strings.Join(names, ", "))
}

// zkSession is the session timeout a ZooKeeper ensemble grants for one
// asked: bounded to [2, 20] ticks of its servers' tick time.
func zkSession(asked time.Duration, servers []backends.ServerSpec) time.Duration {
	tick := 2 * time.Second // ZooKeeper's own
	if len(servers) > 0 {
		if ms, err := strconv.Atoi(servers[0].Settings["tickTime"]); err == nil {
			tick = time.Duration(ms) * time.Millisecond
		}
	}
	return min(max(asked, 2*tick), 20*tick)
}

// number reads a YAML number (int or float).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	}
	return 0, false
}

// ReferenceNames lists the reference drivers' names.
func ReferenceNames() []string {
	var out []string
	for _, r := range References {
		out = append(out, r.Name)
	}
	return slices.Clip(out)
}
