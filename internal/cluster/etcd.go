package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
)

// EtcdVersion is the etcd release built by scripts/build-servers.sh.
const EtcdVersion = "v3.6.16"

// CacheDir is where built servers are cached, outside any clone so that
// every clone on the machine reuses them.
func CacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "lockbench")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "lockbench-cache")
	}
	return filepath.Join(home, ".cache", "lockbench")
}

func cachedBinary(env, name, version string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	p := filepath.Join(CacheDir(), name+"-"+version, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s %s is not built; run `make servers` (scripts/build-servers.sh %s) to build it from the Go module proxy, or set %s",
			ErrMissingBinary, name, version, name, env)
	}
	return p, nil
}

// versionOf runs the binary of a server kind with args and returns the
// first line it prints.
func versionOf(kind string, args ...string) string {
	bin, err := binary(kind)
	if err != nil {
		return "unknown"
	}
	return firstLine(bin, args...)
}

func init() {
	RegisterKind(Kind{Name: "etcd", Start: startEtcd, Binary: etcdBinary,
		Version: func() string { return versionOf("etcd", "--version") },
		Short: func(v string) string {
			if f := strings.Fields(v); len(f) >= 3 && f[0] == "etcd" {
				return "etcd " + f[2]
			}
			return v
		},
		Leader: func(ctx context.Context, live map[string][]*Server) (string, error) {
			return etcdLeader(ctx, live["etcd"])
		},
		// Each member's peer traffic can go through a proxy of its own.
		Links: func(specs []backends.ServerSpec) []string {
			var out []string
			for _, sp := range specs {
				out = append(out, sp.Name+"-peer")
			}
			return out
		},
		// Go reads the wall clock through the vDSO, out of libfaketime's reach.
		Faults:      faults.Abilities{Clock: faults.ClockNone},
		Credentials: "etcd", Drivers: true,
		Setup:   Setup{Build: "etcd"},
		Compose: "etcd", Kube: "etcd"})
}

func etcdBinary() (string, error) { return cachedBinary("LOCKBENCH_ETCD", "etcd", EtcdVersion) }

// startEtcd starts an etcd cluster, each member on its own address of the
// run's slot. A member whose peer link a fault acts on advertises a
// toxiproxy proxy as its peer URL, so latency or a partition can target
// the peer side alone. Settings: heartbeat-interval and election-timeout
// (ms), unsafe-no-fsync ("true": the member acknowledges what it never
// fsynced).
func startEtcd(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := etcdBinary()
	if err != nil {
		return err
	}
	var servers []*Server
	var initial []string
	peerURL := map[string]string{}
	for _, sp := range specs {
		ip := c.allocIP()
		s := &Server{Spec: sp, IP: ip, Addr: ip + ":2379"}
		if err := c.add(s); err != nil {
			return err
		}
		peer, err := c.routed(sp.Name+"-peer", ip+":2380")
		if err != nil {
			return err
		}
		peerURL[sp.Name] = "http://" + peer
		initial = append(initial, sp.Name+"="+peerURL[sp.Name])
		servers = append(servers, s)
	}
	for _, s := range servers {
		s := s
		args := []string{"--name", s.Spec.Name, "--data-dir", filepath.Join(s.Dir, "data"),
			"--listen-peer-urls", "http://" + s.IP + ":2380", "--initial-advertise-peer-urls", peerURL[s.Spec.Name],
			"--listen-client-urls", "http://" + s.IP + ":2379", "--advertise-client-urls", "http://" + s.IP + ":2379",
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "lockbench-" + c.RunID, "--log-level", "warn"}
		for _, k := range []string{"heartbeat-interval", "election-timeout"} {
			if v, ok := s.Spec.Settings[k]; ok {
				args = append(args, "--"+k, v)
			}
		}
		if s.Spec.Settings["unsafe-no-fsync"] == "true" {
			args = append(args, "--unsafe-no-fsync")
		}
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, args...), nil }
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 30*time.Second, func() error { return etcdHealthy(s.Addr, initial) })
		}
		if err := c.spawn(s); err != nil {
			return err
		}
	}
	return c.awaitAll(ctx, servers)
}

// etcdHealthy asks a member's /health endpoint, which is true once the
// cluster has a leader and the member can serve, and checks that the
// cluster answering is this run's: its members and peer URLs are the ones
// started (initial lists "name=peerURL").
func etcdHealthy(addr string, initial []string) error {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + addr + "/health")
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	if !strings.Contains(string(b), `"health":"true"`) {
		return fmt.Errorf("health: %s", strings.TrimSpace(string(b)))
	}
	resp, err = cl.Post("http://"+addr+"/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var list struct {
		Members []struct {
			Name     string   `json:"name"`
			PeerURLs []string `json:"peerURLs"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	var got []string
	for _, m := range list.Members {
		for _, u := range m.PeerURLs {
			got = append(got, m.Name+"="+u)
		}
	}
	sort.Strings(got)
	want := append([]string(nil), initial...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("the cluster answering has members %v, not this run's %v", got, want)
	}
	return nil
}

func etcdLeader(ctx context.Context, members []*Server) (string, error) {
	type status struct {
		id, leader string
		term       uint64
	}
	answers := askMembers(ctx, members, time.Second, func(ctx context.Context, s *Server) (status, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Addr+"/v3/maintenance/status", strings.NewReader("{}"))
		if err != nil {
			return status{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return status{}, err
		}
		defer resp.Body.Close()
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader   string `json:"leader"`
			RaftTerm string `json:"raftTerm"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return status{}, err
		}
		term, _ := strconv.ParseUint(st.RaftTerm, 10, 64)
		return status{id: st.Header.MemberID, leader: st.Leader, term: term}, nil
	})
	// The leader is the one named in the highest term any member knows:
	// a member cut off or just resumed may still name an older one.
	ids := map[string]string{}
	var leader string
	var term uint64
	for _, a := range answers {
		if a.err != nil {
			continue // a dead or stopped member cannot be the leader
		}
		ids[a.v.id] = a.s.Spec.Name
		if a.v.leader != "" && a.v.leader != "0" && (leader == "" || a.v.term > term) {
			leader, term = a.v.leader, a.v.term
		}
	}
	if name, ok := ids[leader]; ok {
		return name, nil
	}
	return "", fmt.Errorf("no etcd member reports a live leader (leader id %q)", leader)
}
