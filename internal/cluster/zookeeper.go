package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
)

// ZooKeeper's jar and configuration as Debian's zookeeper package installs
// them. More jars on the class path break logging start-up (an slf4j
// delegation loop), so it stays these two entries.
var (
	ZooKeeperJar  = "/usr/share/java/zookeeper.jar"
	ZooKeeperConf = "/etc/zookeeper/conf"
)

func init() {
	RegisterKind(Kind{Name: "zookeeper", Start: startZooKeeper, Binary: zookeeperBinary,
		Version: func() string {
			out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "zookeeper").Output()
			if err != nil {
				return "unknown"
			}
			return "zookeeper " + string(out)
		},
		Leader: func(ctx context.Context, live map[string][]*Server) (string, error) {
			answers := askMembers(ctx, live["zookeeper"], 2*time.Second, func(_ context.Context, s *Server) (string, error) {
				return zkMode(s.Addr)
			})
			for _, a := range answers {
				if a.err == nil && a.v == "leader" {
					return a.s.Spec.Name, nil
				}
			}
			return "", errors.New("no zookeeper member says it is the leader")
		},
		// ZooKeeper times its sessions on the monotonic clock.
		Faults:      faults.Abilities{Clock: faults.ClockNone},
		Credentials: "zookeeper", Drivers: true,
		Setup:   Setup{Apt: []Package{{Name: "zookeeper", Present: "[ -f /usr/share/java/zookeeper.jar ]"}}},
		Compose: "zookeeper", Kube: "zookeeper"})
}

func zookeeperBinary() (string, error) {
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return "", fmt.Errorf("%w: %s; install it with `apt-get install -y --no-install-recommends zookeeper` (or run `make setup` as root)", ErrMissingBinary, ZooKeeperJar)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java (ZooKeeper needs a JRE; `apt-get install -y default-jre-headless`)", ErrMissingBinary)
	}
	return java, nil
}

// startZooKeeper starts an ensemble, each member on its own loopback
// address with its own data dir and myid. Settings: tickTime (ms, default
// 500), minSessionTimeout and maxSessionTimeout (ms; ZooKeeper's defaults
// are 2 and 20 ticks), forceSync ("no": the log is not fsynced before a
// transaction is acknowledged).
func startZooKeeper(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	java, err := zookeeperBinary()
	if err != nil {
		return err
	}
	var servers []*Server
	var lines []string
	for i, sp := range specs {
		ip := c.allocIP()
		s := &Server{Spec: sp, IP: ip, Addr: ip + ":2181"}
		if err := c.add(s); err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("server.%d=%s:2888:3888", i+1, ip))
		servers = append(servers, s)
	}
	for i, s := range servers {
		s := s
		set := s.Spec.Settings
		tick := set["tickTime"]
		if tick == "" {
			tick = "500"
		}
		cfg := []string{"tickTime=" + tick, "initLimit=10", "syncLimit=5", "dataDir=" + s.Dir,
			"clientPortAddress=" + s.IP, "clientPort=2181", "4lw.commands.whitelist=srvr,ruok,mntr,conf",
			"admin.enableServer=false", "quorumListenOnAllIPs=false"}
		for _, k := range []string{"minSessionTimeout", "maxSessionTimeout", "forceSync"} {
			if v := set[k]; v != "" {
				cfg = append(cfg, k+"="+v)
			}
		}
		cfg = append(cfg, lines...)
		cfgPath := filepath.Join(s.Dir, "zoo.cfg")
		if err := os.WriteFile(cfgPath, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("%s config: %w", s.Spec.Name, err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "myid"), []byte(fmt.Sprintf("%d\n", i+1)), 0o644); err != nil {
			return fmt.Errorf("%s myid: %w", s.Spec.Name, err)
		}
		s.command = func() (*exec.Cmd, error) {
			cmd := exec.Command(java, "-Xmx256m", "-Dzookeeper.log.dir="+s.Dir, "-cp", ZooKeeperConf+":"+ZooKeeperJar,
				"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
			return cmd, nil
		}
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 60*time.Second, func() error {
				mode, err := zkMode(s.Addr)
				if err != nil {
					return err
				}
				if mode != "leader" && mode != "follower" && mode != "standalone" {
					return fmt.Errorf("mode %q", mode)
				}
				// The member answering is this run's: its data dir is ours.
				conf, err := zk4lw(s.Addr, "conf")
				if err != nil {
					return err
				}
				if !strings.Contains(conf, "dataDir="+s.Dir) {
					return fmt.Errorf("the member answering on %s has another data dir", s.Addr)
				}
				return nil
			})
		}
		if err := c.spawn(s); err != nil {
			return err
		}
	}
	return c.awaitAll(ctx, servers)
}

// zk4lw sends a four-letter command to a member and returns its answer.
func zk4lw(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return string(b), nil
}

// zkMode asks a member `srvr` and returns its mode (leader, follower).
func zkMode(addr string) (string, error) {
	out, err := zk4lw(addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("no mode in srvr answer %q", out)
}
