package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name Sentinel monitors the master under.
const SentinelMaster = "lockbench"

func init() {
	starters["redis-replicated"] = startReplicated
	starters["sentinel"] = startSentinels
	binaries["redis-replicated"] = binaries["redis"]
	binaries["sentinel"] = binaries["redis"]
	versions["redis-replicated"] = versions["redis"]
	versions["sentinel"] = versions["redis"]
}

// startReplicated starts a master (the first spec) and its replicas. Every
// server announces its client proxy, so Sentinel and clients reach each one
// through toxiproxy. Replicas replicate from the master's own replication
// proxy, link:redis-1-repl, so that replication can be cut separately
// (until a failover, when Sentinel points them at the new master's
// announced address). Settings: min-replicas-to-write, min-replicas-max-lag.
func startReplicated(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := binaries["redis"]()
	if err != nil {
		return err
	}
	var masterRepl string
	for i, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		ip := s.IP
		// The proxy exists before the server so that it can announce it.
		if s.Proxy, err = c.proxy(sp.Name, s.Addr); err != nil {
			return err
		}
		ph, pp, _ := net.SplitHostPort(s.Proxy.Listen)
		args := []string{"--port", fmt.Sprint(port), "--bind", ip, "--dir", s.Dir, "--save", "", "--daemonize", "no",
			"--protected-mode", "no", "--replica-announce-ip", ph, "--replica-announce-port", pp}
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
		if i == 0 {
			repl, err := c.proxy(sp.Name+"-repl", s.Addr)
			if err != nil {
				return err
			}
			masterRepl = repl.Listen
		} else {
			mh, mp, _ := net.SplitHostPort(masterRepl)
			args = append(args, "--replicaof", mh, mp)
		}
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, args...), nil }
		replica := i > 0
		s.ready = func(ctx context.Context, p *Process) error {
			return poll(ctx, p, 20*time.Second, func() error {
				if err := pingRedis(s.Addr); err != nil {
					return err
				}
				if !replica {
					return nil
				}
				info, err := redisInfo(ctx, s.Addr, "replication")
				if err != nil {
					return err
				}
				if !strings.Contains(info, "master_link_status:up") {
					return fmt.Errorf("replica not in sync with the master yet")
				}
				return nil
			})
		}
		if err := c.launch(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// startSentinels starts Sentinels monitoring the master started by
// startReplicated (through its proxy). Settings: quorum,
// down-after-milliseconds, failover-timeout, master (the master's name in
// the cluster), replicas (how many to expect).
func startSentinels(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := binaries["redis"]()
	if err != nil {
		return err
	}
	set := specs[0].Settings
	master := c.Server(set["master"])
	if master == nil {
		return fmt.Errorf("sentinels: no master server %q started", set["master"])
	}
	mh, mp, _ := net.SplitHostPort(master.Proxy.Listen)
	wantReplicas, _ := strconv.Atoi(set["replicas"])
	for _, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		ip := s.IP
		conf := []string{fmt.Sprintf("port %d", port), "bind " + ip, "dir " + s.Dir, "protected-mode no",
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
		s.ready = func(ctx context.Context, p *Process) error {
			return poll(ctx, p, 30*time.Second, func() error { return sentinelReady(ctx, s.Addr, n-1, wantReplicas) })
		}
		if err := c.spawn(s); err != nil {
			return err
		}
	}
	for _, name := range c.Names() {
		s := c.Server(name)
		if s.Spec.Kind != "sentinel" {
			continue
		}
		if err := c.await(ctx, s); err != nil {
			return err
		}
		if s.Proxy, err = c.proxy(s.Spec.Name, s.Addr); err != nil {
			return err
		}
	}
	return nil
}

func redisInfo(ctx context.Context, addr, section string) (string, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer cl.Close()
	return cl.Info(ctx, section).Result()
}

// sentinelReady checks that a Sentinel knows the master, the other
// Sentinels and the replicas.
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
	return nil
}
