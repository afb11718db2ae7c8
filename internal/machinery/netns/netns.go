// Package netns puts every server and worker instance of a run on a host
// of its own: a network namespace with one interface on a switch of the
// run's own (hosts mode), or a container of a compose topology. On such
// hosts a cut is a DROP rule in the receiving host's namespace, and netem
// shapes what a host sends.
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/docker"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
)

// Hosts puts every server and every worker instance of a run on a host of
// its own: a network namespace the harness makes, with one interface (eth0)
// on a bridge of the run's own, and its own address in the run's slot
// (10.<64+n>.0.0/16: the harness 10.X.0.1 on the bridge, servers 10.X.0.10
// and up, instance N 10.X.1.N). Whatever a process sends leaves from that
// address, so links between any two hosts can be cut (iptables rules in the
// receiving host's own namespace: the sender sees nothing, as in a real
// partition) or slowed (tc netem on the sending host's eth0), member to
// member for every backend, ZooKeeper and etcd included.
//
// The bridge lives in a namespace of its own (lb<n>-switch), whose
// firewall is empty, so the machine's own (Docker's FORWARD policy, the
// bridge-netfilter setting) neither applies to the run's traffic nor is
// touched; the harness reaches the switch through a veth pair (lbbr<n> on
// its side, holding 10.X.0.1). Every namespace carries the slot's number
// (lb<n>-<name>): Close removes them (which removes every veth with them),
// and the next run that takes the slot removes what a killed run left (the
// slot's flock proves that run is gone).
type Hosts struct {
	n       int    // the run's slot
	bridge  string // the harness's end of its link to the switch
	switch_ string // the switch's namespace

	mu     sync.Mutex
	nsByIP map[string]string
	made   []string
	next   int
}

// Available says whether hosts mode can be used: it needs root, ip
// (iproute2) and iptables.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("hosts mode needs root (network namespaces, veth pairs, a bridge)")
	}
	for _, bin := range []string{"ip", "iptables", "tc", "setpriv"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("hosts mode needs %s: %w", bin, err)
		}
	}
	return nil
}

func ipcmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// nsName is the namespace of a host of slot n.
func nsName(n int, host string) string { return fmt.Sprintf("lb%d-%s", n, host) }

// New makes the switch of slot n and the harness's link to it, where the
// harness has address harness, after removing what a killed run of the
// same slot left.
func New(n int, harness string) (*Hosts, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	h := &Hosts{n: n, bridge: fmt.Sprintf("lbbr%d", n), switch_: nsName(n, "switch"), nsByIP: map[string]string{}}
	if err := CleanStale(n); err != nil {
		return nil, err
	}
	if err := ipcmd("netns", "add", h.switch_); err != nil {
		return nil, err
	}
	h.made = append(h.made, h.switch_)
	steps := [][]string{
		{"-n", h.switch_, "link", "add", "br0", "type", "bridge"},
		{"-n", h.switch_, "link", "set", "br0", "up"},
		{"link", "add", h.bridge, "type", "veth", "peer", "name", "up0", "netns", h.switch_},
		{"-n", h.switch_, "link", "set", "up0", "master", "br0", "up"},
		{"addr", "add", harness + "/16", "dev", h.bridge},
		{"link", "set", h.bridge, "up"},
	}
	for _, st := range steps {
		if err := ipcmd(st...); err != nil {
			return nil, errors.Join(err, h.Close())
		}
	}
	return h, nil
}

// Add makes a host: a namespace named after it, with eth0 on the switch at
// ip, and loopback up. It returns the namespace's name.
func (h *Hosts) Add(host, ip string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns := nsName(h.n, host)
	h.next++
	port := fmt.Sprintf("h%d", h.next)
	if err := ipcmd("netns", "add", ns); err != nil {
		return "", err
	}
	h.made = append(h.made, ns)
	steps := [][]string{
		{"-n", h.switch_, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", h.switch_, "link", "set", port, "master", "br0", "up"},
		{"-n", ns, "addr", "add", ip + "/16", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for _, st := range steps {
		if err := ipcmd(st...); err != nil {
			return "", fmt.Errorf("host %s: %w", host, err)
		}
	}
	h.nsByIP[ip] = ns
	return ns, nil
}

// NS returns the namespace that owns ip ("" if none).
func (h *Hosts) NS(ip string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nsByIP[ip]
}

// Wrap makes cmd run inside namespace ns: `ip netns exec ns` execs the
// program, so the process keeps its pid, its process group and its
// parent-death signal. A command that was to run as another user (the
// PostgreSQL server) switches inside, through setpriv, which keeps the
// parent-death signal that a change of user would otherwise clear.
func (h *Hosts) Wrap(ns string, cmd *exec.Cmd) {
	inner := append([]string{cmd.Path}, cmd.Args[1:]...)
	if sp := cmd.SysProcAttr; sp != nil && sp.Credential != nil {
		c := sp.Credential
		inner = append([]string{"setpriv", "--reuid", fmt.Sprint(c.Uid), "--regid", fmt.Sprint(c.Gid), "--clear-groups", "--pdeathsig", "KILL", "--"}, inner...)
		sp.Credential = nil
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "/usr/sbin/ip"
	}
	cmd.Path = ip
	cmd.Args = append([]string{"ip", "netns", "exec", ns}, inner...)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
}

// InNS runs a command inside namespace ns and returns its output. ns is
// a namespace the harness made, or "docker:<container>": the network
// namespace of a container, entered through its main process.
func InNS(ns string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	if c, ok := strings.CutPrefix(ns, "docker:"); ok {
		pid, err := docker.Run("inspect", "-f", "{{.State.Pid}}", c)
		if err != nil {
			return nil, err
		}
		if pid == "0" {
			return nil, fmt.Errorf("container %s is not running", c)
		}
		cmd = exec.Command("nsenter", append([]string{"-t", pid, "-n", name}, args...)...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), ns, err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Drop cuts the packets from src to dst with a DROP rule in dst's own
// INPUT chain: they leave the sender and vanish, and the sender learns
// nothing, as in a real partition. Traffic to the harness (a proxy, the
// resource) is cut in the sender's OUTPUT chain instead. A port restricts
// the rule to TCP.
func (h *Hosts) Drop(src, dst firewall.Endpoint) (*HostRule, error) { return h.DropSome(src, dst, 1) }

// DropSome drops each packet from src to dst with probability p (1: all).
func (h *Hosts) DropSome(src, dst firewall.Endpoint, p float64) (*HostRule, error) {
	ns, chain := h.NS(dst.IP), "INPUT"
	if ns == "" {
		ns, chain = h.NS(src.IP), "OUTPUT"
	}
	if ns == "" {
		return nil, fmt.Errorf("no host owns %s or %s: only servers and instances can be cut", src.IP, dst.IP)
	}
	h.mu.Lock()
	h.next++
	comment := fmt.Sprintf("lockbench-%d", h.next)
	h.mu.Unlock()
	spec := firewall.Spec(src, dst, p, comment)
	if _, err := InNS(ns, "iptables", append([]string{"-w", "-A", chain}, spec...)...); err != nil {
		return nil, err
	}
	return &HostRule{ns: ns, chain: chain, spec: spec, comment: comment}, nil
}

// HostRule is a DROP rule in a host's namespace.
type HostRule struct {
	ns, chain, comment string
	spec               []string
}

// Undo removes the rule (a namespace already gone took it along).
func (r *HostRule) Undo() error {
	if gone(r.ns) {
		return nil
	}
	_, err := InNS(r.ns, "iptables", append([]string{"-w", "-D", r.chain}, r.spec...)...)
	return err
}

// Packets returns how many packets the rule has dropped.
func (r *HostRule) Packets() (int64, error) {
	out, err := InNS(r.ns, "iptables", "-w", "-L", r.chain, "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	return firewall.Packets(string(out), r.comment, r.ns)
}

// gone reports whether a namespace no longer exists (a container that
// stopped took its own along).
func gone(ns string) bool {
	if c, ok := strings.CutPrefix(ns, "docker:"); ok {
		pid, err := docker.Run("inspect", "-f", "{{.State.Pid}}", c)
		return err != nil || pid == "0"
	}
	_, err := os.Stat("/run/netns/" + ns)
	return err != nil
}

// Containers is a Hosts whose hosts are containers someone else made (a
// compose topology): Register names them, Close leaves them alone.
func Containers() *Hosts {
	return &Hosts{nsByIP: map[string]string{}}
}

// Register makes the host at ip the container's network namespace.
func (h *Hosts) Register(ip, container string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nsByIP[ip] = "docker:" + container
}

// Close removes the harness's link to the switch, then every namespace,
// the switch's last (taking every veth with it). The link goes first:
// deleting a namespace removes its veths asynchronously, so a link still
// listed after the switch is gone may vanish before it can be deleted.
func (h *Hosts) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	if h.bridge != "" {
		if err := delLink(h.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(h.made) - 1; i >= 0; i-- {
		if err := ipcmd("netns", "del", h.made[i]); err != nil {
			errs = append(errs, err)
		}
	}
	h.made = nil
	return errors.Join(errs...)
}

// delLink deletes a network link; one that does not exist (or stopped
// existing meanwhile) is not an error.
func delLink(name string) error {
	if exec.Command("ip", "link", "show", name).Run() != nil {
		return nil
	}
	err := ipcmd("link", "del", name)
	if err != nil && exec.Command("ip", "link", "show", name).Run() != nil {
		return nil
	}
	return err
}

// CleanStale removes the namespaces and bridge of slot n that a
// killed run left behind. Only the holder of slot n calls it, so nothing
// it removes can belong to a live run.
func CleanStale(n int) error {
	var errs []error
	if err := delLink(fmt.Sprintf("lbbr%d", n)); err != nil {
		errs = append(errs, err)
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], fmt.Sprintf("lb%d-", n)) {
				if err := ipcmd("netns", "del", f[0]); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// StaleSlots lists the slots that namespaces or bridges of lockbench's
// (lb<n>-<host>, lbbr<n>) are named after, live or left by a killed run:
// the caller cleans those whose slot nobody holds (CleanStale).
func StaleSlots() []int {
	seen := map[int]bool{}
	var out []int
	add := func(name, prefix string) {
		var n int
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			return
		}
		digits, _, _ := strings.Cut(rest, "-")
		if _, err := fmt.Sscanf(digits, "%d", &n); err != nil || fmt.Sprint(n) != digits || seen[n] {
			return
		}
		seen[n] = true
		out = append(out, n)
	}
	if b, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") {
				add(f[0], "lb")
			}
		}
	}
	if b, err := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output(); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				add(strings.TrimSuffix(f[1], ":"), "lbbr")
			}
		}
	}
	return out
}

// Shaping is a netem queue in force on a host's eth0.
type Shaping struct {
	ns string
}

// Shape puts netem (delay, jitter, loss) on what the host of namespace ns
// sends: to the given addresses only (a prio qdisc whose fourth band is
// the netem queue, u32 filters sending those destinations to it), or to
// everyone.
func (h *Hosts) Shape(ns string, dst []string, delay, jitter time.Duration, loss float64) (*Shaping, error) {
	spec := []string{}
	if delay > 0 {
		spec = append(spec, "delay", fmt.Sprintf("%dus", delay.Microseconds()))
		if jitter > 0 {
			spec = append(spec, fmt.Sprintf("%dus", jitter.Microseconds()))
		}
	}
	if loss > 0 {
		spec = append(spec, "loss", fmt.Sprintf("%g%%", loss))
	}
	sh := &Shaping{ns: ns}
	if len(dst) == 0 {
		if _, err := InNS(ns, "tc", append([]string{"qdisc", "add", "dev", "eth0", "root", "handle", "40:", "netem"}, spec...)...); err != nil {
			return nil, err
		}
		return sh, nil
	}
	steps := [][]string{
		{"qdisc", "add", "dev", "eth0", "root", "handle", "1:", "prio", "bands", "4", "priomap", "1", "2", "2", "2", "1", "2", "0", "0", "1", "1", "1", "1", "1", "1", "1", "1"},
		append([]string{"qdisc", "add", "dev", "eth0", "parent", "1:4", "handle", "40:", "netem"}, spec...),
	}
	for _, ip := range dst {
		steps = append(steps, []string{"filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", ip + "/32", "flowid", "1:4"})
	}
	for _, st := range steps {
		if _, err := InNS(ns, "tc", st...); err != nil {
			return nil, errors.Join(err, sh.Undo())
		}
	}
	return sh, nil
}

// Packets returns how many packets went through the netem queue.
func (s *Shaping) Packets() (int64, error) {
	out, err := InNS(s.ns, "tc", "-s", "qdisc", "show", "dev", "eth0")
	if err != nil {
		return 0, err
	}
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "qdisc netem 40:") && i+1 < len(lines) {
			// " Sent 1234 bytes 17 pkt (dropped 0, overlimits 0 requeues 0)"
			f := strings.Fields(lines[i+1])
			for j := 0; j+1 < len(f); j++ {
				if f[j+1] == "pkt" {
					return strconv.ParseInt(f[j], 10, 64)
				}
			}
		}
	}
	return 0, fmt.Errorf("no netem queue on eth0 of %s", s.ns)
}

// Undo removes the queue (a namespace already gone took it along).
func (s *Shaping) Undo() error {
	if gone(s.ns) {
		return nil
	}
	_, err := InNS(s.ns, "tc", "qdisc", "del", "dev", "eth0", "root")
	if err != nil && strings.Contains(err.Error(), "No such file") {
		return nil
	}
	return err
}

var (
	netemOnce sync.Once
	netemErr  error
)

// NetemAvailable says whether this kernel can shape traffic with tc netem
// (CONFIG_NET_SCH_NETEM): it tries, once, on a veth pair in a scratch
// namespace.
func NetemAvailable() error {
	netemOnce.Do(func() {
		if err := Available(); err != nil {
			netemErr = err
			return
		}
		ns := fmt.Sprintf("lbprobe-%d", os.Getpid())
		if err := ipcmd("netns", "add", ns); err != nil {
			netemErr = err
			return
		}
		defer ipcmd("netns", "del", ns)
		if err := ipcmd("-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"); err != nil {
			netemErr = err
			return
		}
		if _, err := InNS(ns, "tc", "qdisc", "add", "dev", "p0", "root", "netem", "delay", "1ms"); err != nil {
			netemErr = fmt.Errorf("this kernel cannot run tc netem (CONFIG_NET_SCH_NETEM): %w", err)
		}
	})
	return netemErr
}
