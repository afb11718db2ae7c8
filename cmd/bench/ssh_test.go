package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/netns"
	"github.com/lockbench/lockbench/internal/machinery/slot"

	"github.com/lockbench/lockbench/internal/cluster"
)

// remoteHosts are network namespaces on a bridge of their own, each a
// "remote host" running sshd and one server started by its own service
// command, as an administrator's machines would: lockbench reaches them
// only through the targets file's control plane.
type remoteHosts struct {
	dir, targets, keyEnv string
	ns, ip, start, pid   map[string]string // by server name
}

// startRemoteHosts makes a host per server (redis-1; etcd-1..3), with sshd
// on port 22 (host keys in a known_hosts file, a client key for root), and
// starts each server there. Everything is removed at the test's end.
func startRemoteHosts(t *testing.T) *remoteHosts {
	t.Helper()
	for _, bin := range []string{"/usr/sbin/sshd", "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (make setup installs openssh-server): %v", bin, err)
		}
	}
	etcd, err := cluster.Binary("etcd")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := slot.AcquireHosts()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Release)
	hosts, err := netns.New(sl.N, sl.Harness())
	if err != nil {
		t.Fatal(err)
	}
	r := &remoteHosts{dir: t.TempDir(), keyEnv: "LB_TEST_SSH_KEY", ns: map[string]string{}, ip: map[string]string{}, start: map[string]string{}, pid: map[string]string{}}
	if err := os.Chmod(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The servers first (their groups), then the hosts.
		for name, pf := range r.pid {
			if b, err := os.ReadFile(pf); err == nil {
				var pid int
				fmt.Sscanf(string(b), "%d", &pid)
				if pid > 0 {
					syscall.Kill(-pid, syscall.SIGKILL)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			_ = name
		}
		hosts.Close()
	})
	keygen := func(f string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	keygen(filepath.Join(r.dir, "host"))
	keygen(filepath.Join(r.dir, "client"))
	pub, _ := os.ReadFile(filepath.Join(r.dir, "client.pub"))
	hostPub, _ := os.ReadFile(filepath.Join(r.dir, "host.pub"))
	os.WriteFile(filepath.Join(r.dir, "authorized_keys"), pub, 0o600)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege separation dir
		t.Fatal(err)
	}
	names := []string{"redis-1", "etcd-1", "etcd-2", "etcd-3"}
	var known bytes.Buffer
	var cluster3 []string
	for i, n := range names {
		r.ip[n] = sl.Server(i + 1)
		if strings.HasPrefix(n, "etcd") {
			cluster3 = append(cluster3, fmt.Sprintf("%s=http://%s:2380", n, r.ip[n]))
		}
	}
	for _, n := range names {
		ip := r.ip[n]
		ns, err := hosts.Add(n, ip)
		if err != nil {
			t.Fatal(err)
		}
		r.ns[n] = ns
		fmt.Fprintf(&known, "%s %s", ip, hostPub)
		cfg := filepath.Join(r.dir, n+".sshd")
		os.WriteFile(cfg, []byte(fmt.Sprintf("ListenAddress %s:22\nHostKey %s\nAuthorizedKeysFile %s\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile %s\n",
			ip, filepath.Join(r.dir, "host"), filepath.Join(r.dir, "authorized_keys"), filepath.Join(r.dir, n+".sshd.pid"))), 0o644)
		// ip netns exec gives the host a mount namespace of its own with a
		// fresh /sys, where the cgroup controllers are not mounted: mount
		// the CPU and block I/O ones there, as a real host has them (the
		// same hierarchies as this machine's; the mounts go with the
		// namespace).
		sshd := exec.Command("ip", "netns", "exec", ns, "sh", "-c",
			"mount -t tmpfs tmpfs /sys/fs/cgroup && for c in cpu blkio; do mkdir /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || exit 1; done && exec /usr/sbin/sshd -D -e -f "+cfg)
		sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		logf, _ := os.Create(filepath.Join(r.dir, n+".sshd.log"))
		sshd.Stdout, sshd.Stderr = logf, logf
		if err := sshd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-sshd.Process.Pid, syscall.SIGKILL); sshd.Wait(); logf.Close() })
		data := filepath.Join(r.dir, n)
		os.MkdirAll(data, 0o755)
		r.pid[n] = filepath.Join(r.dir, n+".pid")
		if n == "redis-1" {
			r.start[n] = fmt.Sprintf("redis-server --bind %s --port 6379 --protected-mode no --daemonize yes --pidfile %s --dir %s --save '' --appendonly no --logfile %s/redis.log",
				ip, r.pid[n], data, data)
		} else {
			r.start[n] = fmt.Sprintf("setsid %s --name %s --data-dir %s/data --listen-client-urls http://%s:2379 --advertise-client-urls http://%s:2379 --listen-peer-urls http://%s:2380 --initial-advertise-peer-urls http://%s:2380 --initial-cluster %s --initial-cluster-state new --heartbeat-interval 100 --election-timeout 1000 > %s/etcd.log 2>&1 < /dev/null & echo $! > %s",
				etcd, n, data, ip, ip, ip, ip, strings.Join(cluster3, ","), data, r.pid[n])
		}
	}
	os.WriteFile(filepath.Join(r.dir, "known_hosts"), known.Bytes(), 0o644)
	for _, n := range names {
		waitFor(t, 10*time.Second, "sshd on "+n, func() bool {
			c, err := net.DialTimeout("tcp", r.ip[n]+":22", time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		// The administrator starts each server with its service command.
		if out, err := exec.Command("ip", "netns", "exec", r.ns[n], "sh", "-c", r.start[n]).CombinedOutput(); err != nil {
			t.Fatalf("start %s: %v: %s", n, err, out)
		}
		waitFor(t, 10*time.Second, n+"'s pid file", func() bool { return r.state(n) != "gone" })
	}
	var tf bytes.Buffer
	tf.WriteString("servers:\n")
	for _, n := range names {
		port := 6379
		if n != "redis-1" {
			port = 2379
		}
		fmt.Fprintf(&tf, "  %s: %s:%d\n", n, r.ip[n], port)
	}
	tf.WriteString("control:\n")
	for _, n := range names {
		fmt.Fprintf(&tf, "  %s:\n    ssh: {host: %s, user: root, key_env: %s, known_hosts: known_hosts}\n    pid_file: %s\n    start: %q\n    data_dir: %s\n",
			n, r.ip[n], r.keyEnv, r.pid[n], r.start[n], filepath.Join(r.dir, n))
	}
	r.targets = filepath.Join(r.dir, "targets.yaml")
	os.WriteFile(r.targets, tf.Bytes(), 0o644)
	return r
}

// inNS runs a shell command in a host's namespace.
func (r *remoteHosts) inNS(server, cmd string) string {
	out, _ := exec.Command("ip", "netns", "exec", r.ns[server], "sh", "-c", cmd).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// state is the process state of a server's main process (R, S, T...), or
// "gone".
func (r *remoteHosts) state(server string) string {
	b, err := os.ReadFile(r.pid[server])
	if err != nil {
		return "gone"
	}
	var pid int
	fmt.Sscanf(string(b), "%d", &pid)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	s := string(st)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func (r *remoteHosts) env() []string {
	return []string{r.keyEnv + "=" + filepath.Join(r.dir, "client")}
}

// everywhere is one scenario that runs unchanged on lockbench's own
// servers (bench run -network hosts: a member can be cut from its peers
// only when each is a host of its own) and on a targets file's servers
// through their control plane: the server faults the issue names (a
// pause of the etcd leader, a member partitioned, a kill and restart),
// a CPU quota and a disk stall through the host's cgroups, and a worker
// instance cut from the server it uses.
const everywhere = `
name: everywhere
workload: {duration: 8s, instances: 2, clients: 1, ttl: 2s, hold: {min: 5ms, max: 10ms}}
cases:
  - name: redis
    backend: redis
    # Busy enough that a 1% CPU quota must throttle the server even when
    # the machine is loaded (two clients holding 5-10 ms left it under 1%
    # of a CPU beside another job: the starvation had nothing to stop).
    workload: {clients: 3, hold: {min: 1ms, max: 2ms}}
    faults:
      - {type: pause, target: redis-1, at: 500ms, for: 1s}
      - {type: kill, target: redis-1, at: 2s, for: 500ms}
      - {type: isolate, target: instance-1, at: 3500ms, for: 700ms}
      - {type: cpu-starve, target: redis-1, at: 4500ms, for: 800ms, percent: 1}
    expect: {measure: true}
  - name: etcd
    backend: etcd
    faults:
      - {type: pause, target: leader, at: 500ms, for: 2500ms}
      - {type: isolate, target: follower, at: 3500ms, for: 1500ms}
      - {type: disk-stall, target: leader, at: 5500ms, for: 2s}
    expect: {measure: true}
`

// effectKinds reduces each fault record of a run to what kind of effect
// was observed, for comparing runs on different servers: the fault's
// observations with every number and server or instance name taken out
// ("every process of # stopped", "its rules dropped # packets").
func effectKinds(t *testing.T, dir string) map[string]string {
	t.Helper()
	names := regexp.MustCompile(`\b(redis|etcd|instance|zookeeper|consul|postgres)-[0-9]+\b`)
	nums := regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ns|µs|ms|s|%)?`)
	out := map[string]string{}
	for key, rec := range faultRecords(t, dir) {
		if !rec.Applied || rec.Error != "" {
			out[key] = fmt.Sprintf("not applied: %s", rec.Error)
			continue
		}
		out[key] = nums.ReplaceAllString(names.ReplaceAllString(strings.Join(rec.Observed, "; "), "#"), "N")
	}
	return out
}

// TestSSHControlPlane: the server faults act on servers lockbench did not
// start, over SSH (golang.org/x/crypto/ssh, host keys checked): a pause is
// seen as the remote group stopped, a kill as the process gone and the
// service command bringing it back, a CPU quota and a disk stall as the
// host's cgroups throttling it, an isolate of an etcd member as its
// host's rules dropping packets, and a worker instance is cut from its
// server by its connections' mark; afterwards no rule or cgroup of
// lockbench's is left on any host and every server runs. The same
// scenario file, run on lockbench's own servers in hosts mode, records
// the same kinds of observed effects. A coordinator SIGKILLed while it
// has a member paused, another cut and a third's disk stalled leaves them
// so; the next run repairs them before it starts.
//
// It does not run beside the other integration tests: four hosts, an etcd
// cluster and an SSH session per check are a load of their own, and on two
// cores they made a neighbour's harness miss its deadlines (a CI run).
func TestSSHControlPlane(t *testing.T) {
	alone(t)
	r := startRemoteHosts(t)
	scen := writeScenario(t, everywhere)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runBench(t, r.env(), "run", "-dir", dir, "-targets", r.targets, scen)
	if err != nil {
		faults, _ := os.ReadFile(filepath.Join(dir, "faults.jsonl"))
		t.Fatalf("run: %v\n%s\n%s\nfaults.jsonl:\n%s", err, stdout, stderr, faults)
	}
	recs := faultRecords(t, dir)
	for key, want := range map[string]string{
		"redis/pause-1":      "every process of redis-1 stopped",
		"redis/kill-2":       "restarted",
		"redis/isolate-3":    "dropped",
		"redis/cpu-starve-4": "throttled",
		"etcd/pause-1":       "stopped",
		"etcd/isolate-2":     "dropped",
		"etcd/disk-stall-3":  "went through the throttle",
	} {
		rec, ok := recs[key]
		if !ok || !rec.Applied || rec.Error != "" || !strings.Contains(strings.Join(rec.Observed, "; "), want) {
			t.Errorf("%s: %+v, want applied and observed %q", key, rec, want)
		}
	}
	for name, c := range byCase(readSummary(t, dir)) {
		if c.Check.Status == "invalid" {
			t.Errorf("%s invalid: %v", name, c.Check.Invalid)
		}
	}
	checkClean := func(when string) {
		t.Helper()
		for n := range r.ns {
			if out := r.inNS(n, "iptables -w -S | grep -c "+firewall.ChainPrefix); out != "0" {
				t.Errorf("%s: %s rules of lockbench on %s: %s", when, out, n, r.inNS(n, "iptables -w -S"))
			}
			if st := r.state(n); st == "gone" || st[0] == 'T' {
				t.Errorf("%s: %s is %s", when, n, st)
			}
		}
	}
	checkClean("after the run")
	if left := deadRunCgroups(); len(left) > 0 {
		t.Errorf("after the run: cgroups of lockbench left: %v", left)
	}

	// The same file on lockbench's own servers, each on a host of its own.
	local := filepath.Join(t.TempDir(), "local")
	if stdout, stderr, err := runBench(t, nil, "run", "-dir", local, "-network", "hosts", scen); err != nil {
		faults, _ := os.ReadFile(filepath.Join(local, "faults.jsonl"))
		t.Fatalf("run in hosts mode: %v\n%s\n%s\nfaults.jsonl:\n%s", err, stdout, stderr, faults)
	}
	remote, here := effectKinds(t, dir), effectKinds(t, local)
	if len(remote) != 7 || len(here) != len(remote) {
		t.Errorf("%d faults recorded over SSH, %d on lockbench's own servers; want 7 each", len(remote), len(here))
	}
	for key, k := range remote {
		if here[key] != k {
			t.Errorf("%s observed differently:\n  over SSH:       %s\n  on own servers: %s", key, k, here[key])
		}
	}

	// A coordinator killed mid-fault: etcd-1 paused, etcd-2 cut, etcd-3's
	// disk stalled.
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "stderr.log")
	logf, _ := os.Create(logPath)
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "run", "-dir", filepath.Join(tmp, "out"), "-targets", r.targets,
		writeScenario(t, `
name: killed
workload: {duration: 30s, instances: 1, clients: 1, ttl: 2s}
cases:
  - name: etcd
    backend: etcd
    faults:
      - {type: isolate, target: etcd-2, at: 500ms, for: 20s}
      - {type: pause, target: etcd-1, at: 500ms, for: 20s}
      - {type: disk-stall, target: etcd-3, at: 500ms, for: 20s}
    expect: {measure: true}
`))
	cmd.Env = append(os.Environ(), r.env()...)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, 60*time.Second, "the three faults to fire", func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("fault isolate-1")) && bytes.Contains(b, []byte("fault pause-2")) && bytes.Contains(b, []byte("fault disk-stall-3"))
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if st := r.state("etcd-1"); st == "gone" || st[0] != 'T' {
		t.Errorf("after the SIGKILL etcd-1 is %s, want still stopped (T)", st)
	}
	if out := r.inNS("etcd-2", "iptables -w -S | grep -c "+firewall.ChainPrefix); out == "0" {
		t.Errorf("after the SIGKILL etcd-2 has no lockbench chain left to repair")
	}
	if left := deadRunCgroups(); len(left) == 0 {
		t.Errorf("after the SIGKILL etcd-3 has no lockbench cgroup left to repair")
	}
	// The next run repairs them before it starts, and runs.
	stdout, stderr, err = runBench(t, r.env(), "run", "-dir", filepath.Join(t.TempDir(), "next"), "-targets", r.targets,
		writeScenario(t, "name: next\nworkload: {duration: 1s, instances: 1, clients: 1}\ncases: [{name: etcd, backend: etcd}]\n"))
	if err != nil {
		t.Fatalf("next run: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, "resumed process group") || !strings.Contains(stderr, "removed chain") {
		t.Errorf("the next run did not say what it repaired:\n%s", stderr)
	}
	checkClean("after the repair")
	if left := deadRunCgroups(); len(left) > 0 {
		t.Errorf("after the repair: cgroups of lockbench left: %v", left)
	}
}

// deadRunCgroups lists the cgroups (CPU and block I/O) that a run no
// longer running left. The remote hosts' cgroup hierarchies are this
// machine's, mounted in each host's namespace, so what a host has is
// seen here.
func deadRunCgroups() []string {
	var out []string
	for _, ctrl := range []string{"cpu", "blkio"} {
		dirs, _ := filepath.Glob(filepath.Join(cgroup.Root, ctrl, "lockbench-*"))
		for _, d := range dirs {
			var pid, n int
			if _, err := fmt.Sscanf(filepath.Base(d), "lockbench-%d-%d", &pid, &n); err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
				out = append(out, d)
			}
		}
	}
	return out
}
