package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name Sentinel monitors the master under.
const SentinelMaster = "lockbench"

func init() {
	// A master and its replicas, and the Sentinels watching them: both
	// redis-server, both led by the master the Sentinels name.
	master := func(ctx context.Context, live map[string][]*Server) (string, error) {
		return sentinelMaster(ctx, live["sentinel"], live["redis-replicated"])
	}
	RegisterKind(Kind{Name: "redis-replicated", Start: startReplicated, Binary: redisBinary, Version: redisVersion, Short: redisShort,
		Leader: master, LeaderIsMaster: true, BindsSource: true,
		// The replicas replicate from the first server through one link.
		Links:       func(specs []backends.ServerSpec) []string { return []string{specs[0].Name + "-repl"} },
		Faults:      faults.Abilities{Clock: faults.ClockData, Speaks: faults.ProtoRedis, Memory: true},
		Credentials: "redis", Drivers: true, Setup: Setup{Apt: []Package{{Name: "redis-server", Present: "command -v redis-server"}}},
		NotDeployed: "a master and its replicas under Sentinels have a compose file of their own (compose/sentinel.yml) and no Kubernetes group yet"})
	RegisterKind(Kind{Name: "sentinel", Start: startSentinels, Binary: redisBinary, Version: redisVersion, Short: redisShort,
		Leader: master, LeaderIsMaster: true, BindsSource: true,
		// A Sentinel holds no lock: no clock, no memory of the locks.
		Faults:      faults.Abilities{Clock: faults.ClockNone},
		Credentials: "sentinel", Drivers: true,
		Setup:       Setup{Apt: []Package{{Name: "redis-sentinel", Present: "command -v redis-sentinel"}}},
		NotDeployed: "Sentinels run in compose/sentinel.yml, a compose file of their own, and in no Kubernetes group yet"})
}

// replicatedArgs are the arguments of one server of a replicated set. Every
// server announces its own real address (replicas would otherwise be known
// by the address their connection came from) and uses it as the source of
// its own connections, so that an address-level fault can cut one server
// from another. A diskless full sync starts at once instead of waiting the
// default 5s for more replicas: start-up takes well under a second.
func replicatedArgs(s *Server, port int, sp backends.ServerSpec) []string {
	args := []string{"--port", fmt.Sprint(port), "--bind", s.IP, "--bind-source-addr", s.IP, "--dir", s.Dir, "--save", "",
		"--daemonize", "no", "--protected-mode", "no", "--replica-announce-ip", s.IP, "--replica-announce-port", fmt.Sprint(port),
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	switch sp.Persistence {
	case "", "none":
		args = append(args, "--appendonly", "no")
	default:
		args = append(args, "--appendonly", "yes", "--appendfsync", sp.Persistence)
	}
	for _, k := range []string{"min-replicas-to-write", "min-replicas-max-lag"} {
		if v, ok := sp.Settings[k]; ok {
			args = append(args, "--"+k, v)
		}
	}
	return append(args, sp.Args...)
}

// startReplicated starts a master (the first spec) and its replicas, the
// replicas all at once. Replicas replicate from the master's real address,
// or from a proxy when a fault acts on link:redis-1-repl (so replication
// can be cut on its own until a failover, when Sentinel points the
// replicas at the new master's real address). Settings:
// min-replicas-to-write, min-replicas-max-lag.
func startReplicated(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := redisBinary()
	if err != nil {
		return err
	}
	var servers []*Server
	var masterRepl string
	for i, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		args := replicatedArgs(s, port, sp)
		if i == 0 {
			if masterRepl, err = c.routed(sp.Name+"-repl", s.Addr); err != nil {
				return err
			}
		} else {
			mh, mp, _ := net.SplitHostPort(masterRepl)
			args = append(args, "--replicaof", mh, mp)
		}
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, args...), nil }
		replica := i > 0
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 20*time.Second, func() error {
				info, err := redisInfo(ctx, s.Addr, "server", "replication")
				if err != nil {
					return err
				}
				if err := samePID(info, p); err != nil {
					return err
				}
				if replica && !strings.Contains(info, "master_link_status:up") {
					return fmt.Errorf("replica not in sync with the master yet")
				}
				return nil
			})
		}
		servers = append(servers, s)
	}
	if err := c.launch(ctx, servers[0]); err != nil {
		return err
	}
	for _, s := range servers[1:] {
		if err := c.spawn(s); err != nil {
			return err
		}
	}
	return c.awaitAll(ctx, servers[1:])
}

// samePID checks that an INFO server answer comes from process p: the
// server answering on this run's address is the one this run started.
func samePID(info string, p *procgroup.Process) error {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != fmt.Sprint(p.Pid()) {
				return fmt.Errorf("the server answering is process %s, not the one started (%d)", v, p.Pid())
			}
			return nil
		}
	}
	return fmt.Errorf("INFO has no process_id")
}

// startSentinels starts Sentinels monitoring the master started by
// startReplicated, at its real address. Each Sentinel announces its own
// address and uses it as its source, so Sentinels find each other (they
// agree the master is down, and fail over) and an address-level fault can
// cut a Sentinel from the master without touching clients. Settings:
// quorum, down-after-milliseconds, failover-timeout, master (the master's
// name in the cluster), replicas (how many to expect).
func startSentinels(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := redisBinary()
	if err != nil {
		return err
	}
	set := specs[0].Settings
	master := c.Server(set["master"])
	if master == nil {
		return fmt.Errorf("sentinels: no master server %q started", set["master"])
	}
	mh, mp, _ := net.SplitHostPort(master.Addr)
	wantReplicas, _ := strconv.Atoi(set["replicas"])
	var servers []*Server
	for _, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		conf := []string{fmt.Sprintf("port %d", port), "bind " + s.IP, "bind-source-addr " + s.IP, "dir " + s.Dir, "protected-mode no",
			"sentinel announce-ip " + s.IP, fmt.Sprintf("sentinel announce-port %d", port),
			fmt.Sprintf("sentinel monitor %s %s %s %s", SentinelMaster, mh, mp, set["quorum"]),
			fmt.Sprintf("sentinel down-after-milliseconds %s %s", SentinelMaster, set["down-after-milliseconds"]),
			fmt.Sprintf("sentinel failover-timeout %s %s", SentinelMaster, set["failover-timeout"]),
			fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster)}
		// Sentinel rewrites its config file, so it needs its own writable copy.
		confPath := filepath.Join(s.Dir, "sentinel.conf")
		if err := os.WriteFile(confPath, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("%s config: %w", sp.Name, err)
		}
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, confPath, "--sentinel"), nil }
		n := len(specs)
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 30*time.Second, func() error { return sentinelReady(ctx, s.Addr, n-1, wantReplicas) })
		}
		if err := c.spawn(s); err != nil {
			return err
		}
		servers = append(servers, s)
	}
	return c.awaitAll(ctx, servers)
}

func redisInfo(ctx context.Context, addr string, sections ...string) (string, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer cl.Close()
	return cl.Info(ctx, sections...).Result()
}

// sentinelReady checks that a Sentinel knows the master, the other
// Sentinels (and does not think them down) and the replicas.
func sentinelReady(ctx context.Context, addr string, others, replicas int) error {
	cl := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer cl.Close()
	m, err := cl.Master(ctx, SentinelMaster).Result()
	if err != nil {
		return err
	}
	if got, _ := strconv.Atoi(m["num-other-sentinels"]); got < others {
		return fmt.Errorf("knows %d other sentinels of %d", got, others)
	}
	if got, _ := strconv.Atoi(m["num-slaves"]); got < replicas {
		return fmt.Errorf("knows %d replicas of %d", got, replicas)
	}
	peers, err := cl.Sentinels(ctx, SentinelMaster).Result()
	if err != nil {
		return err
	}
	for _, p := range peers {
		if flags := fmt.Sprint(p["flags"]); strings.Contains(flags, "down") {
			return fmt.Errorf("sees sentinel %v as %s", p["name"], flags)
		}
	}
	return nil
}

func sentinelMaster(ctx context.Context, sentinels, redises []*Server) (string, error) {
	answers := askMembers(ctx, sentinels, 2*time.Second, func(ctx context.Context, s *Server) (string, error) {
		cl := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		defer cl.Close()
		addr, err := cl.GetMasterAddrByName(ctx, SentinelMaster).Result()
		if err != nil || len(addr) != 2 {
			return "", fmt.Errorf("no master: %v", err)
		}
		hostport := addr[0] + ":" + addr[1]
		for _, r := range redises {
			if r.Addr == hostport {
				return r.Spec.Name, nil
			}
		}
		return "", fmt.Errorf("%s is no known server", hostport)
	})
	// The master most Sentinels name: during a failover some still name
	// the old one.
	best := mostNamed(answers)
	if best == "" {
		return "", errors.New("no sentinel names a known master")
	}
	return best, nil
}
