package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
)

// ConsulVersion is the Consul release built by scripts/build-servers.sh:
// the last MPL-2.0 line that builds here (1.16.1 and later are BSL).
const ConsulVersion = "v1.14.11"

func init() {
	RegisterKind(Kind{Name: "consul", Start: startConsul, Binary: consulBinary,
		Version: func() string { return versionOf("consul", "version") },
		Short: func(v string) string {
			if f := strings.Fields(v); len(f) >= 2 && f[0] == "Consul" {
				return "consul " + strings.TrimPrefix(f[1], "v")
			}
			return v
		},
		Leader: func(ctx context.Context, live map[string][]*Server) (string, error) {
			return consulLeader(ctx, live["consul"])
		},
		BindsSource: true,
		// Go reads the wall clock through the vDSO, out of libfaketime's reach.
		Faults:      faults.Abilities{Clock: faults.ClockNone},
		Credentials: "consul", Drivers: true,
		Setup:   Setup{Build: "consul"},
		Compose: "consul", Kube: "consul"})
}

func consulBinary() (string, error) { return cachedBinary("LOCKBENCH_CONSUL", "consul", ConsulVersion) }

// consulNoPhoneHome turns off what a Consul agent would reach outside the
// run for: HashiCorp's update check (checkpoint-api.hashicorp.com, a DNS
// query to the machine's resolver then HTTPS) and its anonymous signature.
// Nothing a run starts may reach outside the run's own addresses.
var consulNoPhoneHome = []string{"-hcl=disable_update_check = true", "-hcl=disable_anonymous_signature = true"}

// startConsul starts Consul servers, each on its own loopback address
// (gossip and RPC on the same ports of different addresses), joined to each
// other, and waits until every one of them sees the same leader and all
// peers. Only the HTTP client link goes through toxiproxy: serf gossip is
// UDP, which toxiproxy cannot carry.
func startConsul(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := consulBinary()
	if err != nil {
		return err
	}
	var servers []*Server
	var joins, names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
		ip := c.allocIP()
		s := &Server{Spec: sp, IP: ip, Addr: ip + ":8500"}
		if err := c.add(s); err != nil {
			return err
		}
		joins = append(joins, "-retry-join="+ip)
		servers = append(servers, s)
	}
	for _, s := range servers {
		s := s
		args := []string{"agent", "-server", fmt.Sprintf("-bootstrap-expect=%d", len(servers)), "-node=" + s.Spec.Name,
			"-bind=" + s.IP, "-client=" + s.IP, "-data-dir=" + s.Dir, "-dns-port=-1", "-log-level=warn",
			"-disable-host-node-id", "-node-meta=lockbench-run:" + c.RunID}
		args = append(append(args, consulNoPhoneHome...), joins...)
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, args...), nil }
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 60*time.Second, func() error { return consulReady(s.Addr, c.RunID, names) })
		}
		if err := c.spawn(s); err != nil {
			return err
		}
	}
	return c.awaitAll(ctx, servers)
}

// consulReady checks that the server at addr belongs to this run (its
// node meta carries the run id), knows a leader and every raft peer, and
// that every node is registered with a passing serfHealth check: a session
// created before that fails with "Missing check 'serfHealth' registration".
func consulReady(addr, runID string, nodes []string) error {
	cl := http.Client{Timeout: time.Second}
	get := func(path string, v any) error {
		resp, err := cl.Get("http://" + addr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s %s", path, resp.Status, strings.TrimSpace(string(b)))
		}
		return json.Unmarshal(b, v)
	}
	var self struct {
		Meta map[string]string `json:"Meta"`
	}
	if err := get("/v1/agent/self", &self); err != nil {
		return err
	}
	if got := self.Meta["lockbench-run"]; got != runID {
		return fmt.Errorf("the agent answering belongs to run %q, not %q", got, runID)
	}
	var leader string
	if err := get("/v1/status/leader", &leader); err != nil {
		return err
	}
	if leader == "" {
		return fmt.Errorf("no leader yet")
	}
	var peers []string
	if err := get("/v1/status/peers", &peers); err != nil {
		return err
	}
	if len(peers) < len(nodes) {
		return fmt.Errorf("%d of %d raft peers", len(peers), len(nodes))
	}
	for _, n := range nodes {
		var checks []struct {
			CheckID string `json:"CheckID"`
			Status  string `json:"Status"`
		}
		if err := get("/v1/health/node/"+n, &checks); err != nil {
			return err
		}
		ok := false
		for _, ch := range checks {
			ok = ok || ch.CheckID == "serfHealth" && ch.Status == "passing"
		}
		if !ok {
			return fmt.Errorf("node %s has no passing serfHealth check yet", n)
		}
	}
	return nil
}

func consulLeader(ctx context.Context, servers []*Server) (string, error) {
	answers := askMembers(ctx, servers, time.Second, func(ctx context.Context, s *Server) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr+"/v1/status/leader", nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var addr string
		if err := json.NewDecoder(resp.Body).Decode(&addr); err != nil {
			return "", err
		}
		ip, _, _ := strings.Cut(addr, ":")
		for _, t := range servers {
			if addr != "" && t.IP == ip {
				return t.Spec.Name, nil
			}
		}
		return "", errors.New("no leader")
	})
	// The leader most members name (a member cut off may still name the
	// old one); on a tie, the first in the members' order.
	best := mostNamed(answers)
	if best == "" {
		return "", errors.New("no consul server reports a leader")
	}
	return best, nil
}
