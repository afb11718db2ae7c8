package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/driver"
	"github.com/lockbench/lockbench/drivers"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/perf"
	"go.yaml.in/yaml/v3"
)

// driverCmd is bench driver: the conformance check of a driver, the
// reference drivers' list and build, and what a driver's hop costs.
func driverCmd() *command {
	c := newCommand("driver", "check|perf|list|path|build [NAME [COMMAND...]]", "check a lock driver against real servers, measure its cost, list or build the reference drivers, print where their protocol helpers are", 1, -1)
	c.long = `A driver is a lock client in any language behind the driver protocol
(docs/drivers.md). NAME is a reference driver (bench driver list) or, with a
COMMAND after --, a label for your own: LIBRARY or LIBRARY@VERSION, which
the driver's hello must match.

  bench driver check redis-py
  bench driver check -server redis mylib@1.2 -- /usr/bin/python3 my_driver.py
  bench driver check -server redis -options '{lease: none}' mylib -- /usr/bin/python3 my_driver.py
  bench driver perf redis-py kazoo
  bench driver list
  bench driver path     # the protocol helpers' folder ($LOCKBENCH_DRIVERS in a driver's environment)
  bench driver build

check starts the server the driver talks to (one member: the check is of
the driver, not the cluster), and proves its handshake, every operation,
mutual exclusion between two of its clients, unknown outcomes and the
answer within a timeout when its links are cut, its lost signal, its
refusal of requests it cannot serve, and a clean exit that leaves no
process behind. It exits 101 if a step failed, saying what in words, and
the option that would fix it where one would (-options takes a case's
driver options: lease, tokens, extend, acquire, library, env, ...).
Name Debian's interpreter (/usr/bin/python3): a python3 earlier on the
PATH (pyenv's, a virtualenv's) cannot import Debian's python3-* libraries.

perf runs, for each driver, interleaved rounds of the library's own bare
loop (in the driver's process, no lockbench), the harness with the driver
(direct: lock and recording only) and with the protected resource (full),
and prints the ratios and the protocol's round trip.`
	server := c.fs.String("server", "", "check: the server a driver of your own talks to (a Go backend's name: redis, etcd, zookeeper, ...)")
	options := c.fs.String("options", "", "check: the driver backend's options as YAML, as a case gives them (library, server_options, lease, tokens, extend, acquire, env, ...; default for a reference driver: its quick check settings)")
	ttl := c.fs.Duration("ttl", 2*time.Second, "check: the lease time the driver is told")
	clients := c.fs.Int("clients", 8, "perf: concurrent clients, each on a key of its own")
	dur := c.fs.Duration("duration", 5*time.Second, "perf: length of each measured run")
	rounds := c.fs.Int("rounds", 3, "perf: interleaved rounds of bare, direct and full runs")
	out := c.fs.String("o", filepath.Join(os.TempDir(), "lockbench-driver"), "check, perf: folder for logs and the harness runs' results")
	c.exec = func(ctx context.Context, cio cmdIO, args []string) error {
		switch args[0] {
		case "check":
			if len(args) < 2 {
				return exitcode.With(errors.New("driver check takes NAME [COMMAND...]"), exitcode.Config)
			}
			return driverCheck(ctx, cio, args[1], args[2:], *server, *options, *ttl, *out)
		case "perf":
			if len(args) < 2 {
				return exitcode.With(errors.New("driver perf takes one NAME or more"), exitcode.Config)
			}
			if *clients < 1 || *dur <= 0 || *rounds < 1 {
				return exitcode.With(errors.New("driver perf: -clients, -duration and -rounds must be positive"), exitcode.Config)
			}
			return driverPerf(ctx, cio, args[1:], *clients, *dur, *rounds, *out)
		case "list":
			return driverList(cio.stdout)
		case "path":
			dir, err := drivers.Dir()
			if err != nil {
				return err
			}
			fmt.Fprintln(cio.stdout, dir)
			return nil
		case "build":
			dir, err := drivers.Dir()
			if err != nil {
				return err
			}
			classes, err := drivers.JavaClasses()
			if err != nil {
				return err
			}
			fmt.Fprintf(cio.stdout, "drivers in %s (Java classes: %s)\n", dir, classes)
			return nil
		}
		return exitcode.With(fmt.Errorf("driver: %q is not check, perf, list, path or build", args[0]), exitcode.Config)
	}
	return c
}

// driverBackend builds the driver backend a name (and, for a driver of
// one's own, a command) stand for.
func driverBackend(name string, command []string, server, options string) (*driver.Backend, error) {
	label := strings.TrimPrefix(name, "driver:")
	opts := map[string]any{}
	if options != "" {
		if err := yaml.Unmarshal([]byte(options), &opts); err != nil {
			return nil, exitcode.With(fmt.Errorf("-options: %w", err), exitcode.Config)
		}
	} else if len(command) == 0 {
		lib, _, _ := strings.Cut(label, "@")
		if ref, err := driver.LookupReference(lib); err == nil {
			for k, v := range ref.Quick {
				opts[k] = v
			}
		}
	}
	if len(command) > 0 {
		opts["command"] = command
	}
	if server != "" {
		opts["server"] = server
	}
	src, err := yaml.Marshal(opts)
	if err != nil {
		return nil, err
	}
	be, err := driver.New(label, func(v any) error { return config.DecodeStrictBytes(src, v, 0) })
	if err != nil {
		return nil, exitcode.With(fmt.Errorf("driver %s: %w", name, err), exitcode.Config)
	}
	return be.(*driver.Backend), nil
}

func driverCheck(ctx context.Context, cio cmdIO, name string, command []string, server, options string, ttl time.Duration, out string) error {
	b, err := driverBackend(name, command, server, options)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(out, "check-")
	if err != nil {
		return err
	}
	cl, err := cluster.New(fmt.Sprintf("driver-check-%d", os.Getpid()), dir)
	if err != nil {
		return err
	}
	defer cl.Close()
	specs := b.Servers()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	fmt.Fprintf(cio.stdout, "%s against %s, ttl %s (lease %s); logs in %s\n", b.Name(), strings.Join(names, ", "), ttl, b.LeaseTime(ttl), dir)
	began := time.Now()
	if err := cl.Start(ctx, specs); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "driver.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	rep, err := driver.Check(ctx, driver.CheckOptions{Backend: b, Endpoints: cl.Endpoints(), TTL: ttl, Log: logf, Progress: cio.stdout})
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, s := range rep.Steps {
		counts[s.Status]++
	}
	fmt.Fprintf(cio.stdout, "%s: %d passed, %d failed, %d skipped, %d with a note (%s; the driver's stderr: %s)\n", b.Name(),
		counts[driver.Pass]+counts[driver.Note], counts[driver.Fail], counts[driver.Skip], counts[driver.Note], time.Since(began).Round(100*time.Millisecond), logf.Name())
	if n := rep.Failed(); n > 0 {
		return exitcode.With(fmt.Errorf("driver %s failed %d step(s) of its conformance check", b.Name(), n), exitcode.Invalid)
	}
	return nil
}

func driverList(w io.Writer) error {
	fmt.Fprintf(w, "Reference drivers (backend driver:NAME, or driver:NAME@VERSION to pin the version the row names):\n\n")
	for _, r := range driver.References {
		var ab []string
		if r.Extend {
			ab = append(ab, "extend")
		}
		if r.Tokens(nil) {
			ab = append(ab, "tokens")
		}
		if r.Renews(nil) {
			ab = append(ab, "renews")
		}
		ab = append(ab, "acquire "+r.Acquire)
		fmt.Fprintf(w, "  %-13s %s (Debian %s, on %s; %s)\n", r.Name, r.Summary, r.Package, r.Server, strings.Join(ab, ", "))
		keys := make([]string, 0, len(r.Options))
		for k := range r.Options {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "      library.%-22s %s\n", k, r.Options[k])
		}
	}
	return nil
}

func driverPerf(ctx context.Context, cio cmdIO, names []string, clients int, dur time.Duration, rounds int, out string) error {
	var labels []string
	for _, n := range names {
		b, err := driverBackend(n, nil, "", "{}")
		if err != nil {
			return err
		}
		if b.Reference() == nil {
			return exitcode.With(fmt.Errorf("driver perf: %s is not a reference driver", n), exitcode.Config)
		}
		labels = append(labels, "driver:"+b.Reference().Name)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	o := perf.Options{Backends: labels, Clients: clients, Duration: dur, Rounds: rounds, Dir: out, Log: cio.stderr}
	o.Bare = func(ctx context.Context, name string) (perf.Sample, error) {
		return driverBareLoop(ctx, name, clients, dur, out)
	}
	res, err := perf.Run(ctx, o)
	if err != nil {
		return err
	}
	perf.Table(cio.stdout, res, o)
	fmt.Fprintln(cio.stdout)
	return driverRTT(ctx, cio.stdout, labels, out)
}

// driverBareLoop runs a reference driver's library loop on its servers,
// connected directly: nothing of lockbench between them.
func driverBareLoop(ctx context.Context, name string, clients int, dur time.Duration, out string) (perf.Sample, error) {
	// Its defaults, as the harness runs it (no quick check settings).
	b, err := driverBackend(name, nil, "", "{}")
	if err != nil {
		return perf.Sample{}, err
	}
	dir := filepath.Join(out, "bare-logs", strings.ReplaceAll(name, ":", "-"))
	cl, err := cluster.New("perf-bare", dir)
	if err != nil {
		return perf.Sample{}, err
	}
	defer cl.Close()
	if err := cl.Start(ctx, b.Servers()); err != nil {
		return perf.Sample{}, err
	}
	eps := cl.Endpoints()
	var servers []driver.Server
	for _, s := range b.Servers() {
		servers = append(servers, driver.Server{Name: s.Name, Kind: s.Kind, Addr: eps[s.Name], Real: eps[s.Name], Settings: s.Settings})
	}
	logf, err := os.Create(filepath.Join(dir, "driver.log"))
	if err != nil {
		return perf.Sample{}, err
	}
	defer logf.Close()
	cfg, err := b.Config(backends.Env{Instance: 1, TTL: 2 * time.Second}, servers, logf)
	if err != nil {
		return perf.Sample{}, err
	}
	cfg.Hello.Bare = &driver.Bare{Clients: clients, Seconds: dur.Seconds()}
	r, err := driver.RunBare(ctx, cfg)
	if err != nil {
		return perf.Sample{}, err
	}
	return perf.Sample{Cycles: float64(r.Cycles) / r.Seconds, CPUCores: r.CPU.Seconds() / r.Seconds, Errors: r.Errors}, nil
}

// driverRTT measures each driver's protocol round trip (pings, with no
// library call, through the driver's own protocol helper) beside a bare
// echo between the same two runtimes over the same pipes (EchoCommand):
// the echo is what the hop cannot go below, so the ratio says how much
// the protocol adds to it. The two are measured in interleaved blocks, so
// that the machine's drift meets both alike.
func driverRTT(ctx context.Context, w io.Writer, labels []string, out string) error {
	const blocks, perBlock = 10, 200
	fmt.Fprintf(w, "| driver | protocol round trip, median | p99 | bare echo (%s), median | p99 | hop / echo, median | p99 | pings |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", "same runtimes")
	for _, name := range labels {
		b, err := driverBackend(name, nil, "", "{}")
		if err != nil {
			return err
		}
		dir := filepath.Join(out, "rtt-logs", strings.ReplaceAll(name, ":", "-"))
		cl, err := cluster.New("perf-rtt", dir)
		if err != nil {
			return err
		}
		rtt, echo, err := func() ([]time.Duration, []time.Duration, error) {
			defer cl.Close()
			if err := cl.Start(ctx, b.Servers()); err != nil {
				return nil, nil, err
			}
			rs, err := driver.StartRelays(cl.Endpoints(), nil)
			if err != nil {
				return nil, nil, err
			}
			defer rs.Close()
			cfg, err := b.Config(backends.Env{Instance: 1, TTL: 2 * time.Second}, b.HelloServers(rs), io.Discard)
			if err != nil {
				return nil, nil, err
			}
			p, err := driver.Start(ctx, cfg)
			if err != nil {
				return nil, nil, err
			}
			defer p.Close()
			e, err := driver.StartEcho(ctx, b.Reference().Runtime)
			if err != nil {
				return nil, nil, err
			}
			defer e.Close()
			var rtt, echo []time.Duration
			for blk := 0; blk < blocks; blk++ {
				for i := 0; i < perBlock; i++ {
					pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					d, err := p.Ping(pctx)
					cancel()
					if err != nil {
						return nil, nil, err
					}
					rtt = append(rtt, d)
				}
				for i := 0; i < perBlock; i++ {
					d, err := e.Ping()
					if err != nil {
						return nil, nil, err
					}
					echo = append(echo, d)
				}
			}
			slices.Sort(rtt)
			slices.Sort(echo)
			return rtt, echo, nil
		}()
		if err != nil {
			return fmt.Errorf("%s round trip: %w", name, err)
		}
		med := func(d []time.Duration) time.Duration { return d[len(d)/2] }
		p99 := func(d []time.Duration) time.Duration { return d[len(d)*99/100] }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f× | %.2f× | %d + %d |\n", name,
			med(rtt).Round(time.Microsecond), p99(rtt).Round(time.Microsecond),
			med(echo).Round(time.Microsecond), p99(echo).Round(time.Microsecond),
			float64(med(rtt))/float64(med(echo)), float64(p99(rtt))/float64(p99(echo)), len(rtt), len(echo))
	}
	return nil
}
