package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	slot, err := cluster.AcquireHostSlot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slot.Release)
	hosts, err := cluster.NewHosts(slot)
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
		r.ip[n] = slot.Server(i + 1)
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
		// the CPU one there, as a real host has it (the same hierarchy as
		// this machine's; the mounts go with the namespace).
		sshd := exec.Command("ip", "netns", "exec", ns, "sh", "-c",
			"mount -t tmpfs tmpfs /sys/fs/cgroup && mkdir /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu && exec /usr/sbin/sshd -D -e -f "+cfg)
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
		fmt.Fprintf(&tf, "  %s:\n    ssh: {host: %s, user: root, key_env: %s, known_hosts: known_hosts}\n    pid_file: %s\n    start: %q\n",
			n, r.ip[n], r.keyEnv, r.pid[n], r.start[n])
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

const sshFaults = `
name: ssh-faults
workload: {duration: 6s, instances: 2, clients: 1, ttl: 2s, hold: {min: 5ms, max: 10ms}}
cases:
  - name: redis
    backend: redis
    faults:
      - {type: pause, target: redis-1, at: 500ms, for: 1s}
      - {type: kill, target: redis-1, at: 2s, for: 500ms}
      - {type: cpu-starve, target: redis-1, at: 4500ms, for: 800ms, percent: 1}
    expect: {measure: true}
  - name: etcd
    backend: etcd
    faults:
      - {type: isolate, target: leader, at: 500ms, for: 1500ms}
      - {type: pause, target: follower, at: 2500ms, for: 500ms}
    expect: {measure: true}
`

// TestSSHControlPlane: the server faults act on servers lockbench did not
// start, over SSH (golang.org/x/crypto/ssh, host keys checked): a pause is
// seen as the remote group stopped, a kill as the process gone and the
// service command bringing it back, a CPU quota as the host's cgroup
// throttling it, an isolate of the etcd leader as its host's rules
// dropping packets; afterwards no rule of lockbench's is left
// on any host and every server runs. A coordinator SIGKILLed while it has
// a member paused and another cut leaves both so; the next run resumes the
// one and removes the other's chain before it starts.
//
// It does not run beside the other integration tests: four hosts, an etcd
// cluster and an SSH session per check are a load of their own, and on two
// cores they made a neighbour's harness miss its deadlines (a CI run).
func TestSSHControlPlane(t *testing.T) {
	alone(t)
	r := startRemoteHosts(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runBench(t, r.env(), "run", "-dir", dir, "-targets", r.targets, writeScenario(t, sshFaults))
	if err != nil {
		faults, _ := os.ReadFile(filepath.Join(dir, "faults.jsonl"))
		t.Fatalf("run: %v\n%s\n%s\nfaults.jsonl:\n%s", err, stdout, stderr, faults)
	}
	recs := faultRecords(t, dir)
	for key, want := range map[string]string{
		"redis/pause-1":      "every process of redis-1 stopped",
		"redis/kill-2":       "restarted",
		"redis/cpu-starve-3": "throttled",
		"etcd/isolate-1":     "dropped",
		"etcd/pause-2":       "stopped",
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
			if out := r.inNS(n, "iptables -w -S | grep -c "+cluster.ChainPrefix); out != "0" {
				t.Errorf("%s: %s rules of lockbench on %s: %s", when, out, n, r.inNS(n, "iptables -w -S"))
			}
			if st := r.state(n); st == "gone" || st[0] == 'T' {
				t.Errorf("%s: %s is %s", when, n, st)
			}
		}
	}
	checkClean("after the run")

	// A coordinator killed mid-fault: etcd-1 paused, etcd-2 cut.
	long := strings.NewReplacer("for: 1500ms", "for: 20s", "at: 2500ms, for: 500ms", "at: 500ms, for: 20s", "target: leader", "target: etcd-2", "target: follower", "target: etcd-1", "duration: 4s", "duration: 30s").Replace(sshFaults[strings.Index(sshFaults, "  - name: etcd"):])
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "stderr.log")
	logf, _ := os.Create(logPath)
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "run", "-dir", filepath.Join(tmp, "out"), "-targets", r.targets,
		writeScenario(t, "name: killed\nworkload: {duration: 30s, instances: 1, clients: 1, ttl: 2s}\ncases:\n"+long))
	cmd.Env = append(os.Environ(), r.env()...)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, 60*time.Second, "both faults to fire", func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("fault isolate-1")) && bytes.Contains(b, []byte("fault pause-2"))
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if st := r.state("etcd-1"); st == "gone" || st[0] != 'T' {
		t.Errorf("after the SIGKILL etcd-1 is %s, want still stopped (T)", st)
	}
	if out := r.inNS("etcd-2", "iptables -w -S | grep -c "+cluster.ChainPrefix); out == "0" {
		t.Errorf("after the SIGKILL etcd-2 has no lockbench chain left to repair")
	}
	// The next run repairs both before it starts, and runs.
	stdout, stderr, err = runBench(t, r.env(), "run", "-dir", filepath.Join(t.TempDir(), "next"), "-targets", r.targets,
		writeScenario(t, "name: next\nworkload: {duration: 1s, instances: 1, clients: 1}\ncases: [{name: etcd, backend: etcd}]\n"))
	if err != nil {
		t.Fatalf("next run: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, "resumed process group") || !strings.Contains(stderr, "removed chain") {
		t.Errorf("the next run did not say what it repaired:\n%s", stderr)
	}
	checkClean("after the repair")
}
