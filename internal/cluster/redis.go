package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
)

// RedisBinary is the redis-server executable to run.
var RedisBinary = "redis-server"

func init() {
	RegisterKind(Kind{Name: "redis", Start: startRedis, Binary: redisBinary, Version: redisVersion, Short: redisShort, BindsSource: true,
		// Its clock is emulated: libfaketime makes redis-server 7.0 abort
		// at start, and Redis expires keys by its wall clock, so a jump
		// moves every live lock's TTL instead.
		Faults:      faults.Abilities{Clock: faults.ClockData, Speaks: faults.ProtoRedis, Memory: true},
		Credentials: "redis", Drivers: true, Setup: Setup{Apt: []Package{{Name: "redis-server", Present: "command -v redis-server"}}},
		Compose: "redis", Kube: "redis"})
}

func redisBinary() (string, error) {
	p, err := exec.LookPath(RedisBinary)
	if err != nil {
		return "", fmt.Errorf("%w: %s; install it with `apt-get install -y redis-server` (or run `make setup` as root)", ErrMissingBinary, RedisBinary)
	}
	return p, nil
}

func redisVersion() string { return firstLine(RedisBinary, "--version") }

// redisShort: "Redis server v=7.0.15 sha=…" is "redis 7.0.15".
func redisShort(v string) string {
	if f := strings.Fields(v); len(f) >= 3 && f[0] == "Redis" {
		return "redis " + strings.TrimPrefix(f[2], "v=")
	}
	return v
}

// startRedis starts independent redis-server processes, each on its own
// loopback address, with the persistence mode of its spec.
func startRedis(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := redisBinary()
	if err != nil {
		return err
	}
	for _, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		ip := s.IP
		args := []string{"--port", fmt.Sprint(port), "--bind", ip, "--bind-source-addr", ip, "--dir", s.Dir,
			"--save", "", "--daemonize", "no", "--protected-mode", "no"}
		switch sp.Persistence {
		case "", "none":
			args = append(args, "--appendonly", "no")
		case "everysec", "always":
			args = append(args, "--appendonly", "yes", "--appendfsync", sp.Persistence)
		default:
			return fmt.Errorf("start %s: unknown persistence %q", sp.Name, sp.Persistence)
		}
		args = append(args, sp.Args...)
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, args...), nil }
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 10*time.Second, func() error {
				info, err := redisInfo(ctx, s.Addr, "server")
				if err != nil {
					return err
				}
				return samePID(info, p)
			})
		}
		if err := c.launch(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
