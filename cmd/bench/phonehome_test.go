package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/cluster"
	"golang.org/x/sys/unix"
)

// phoneNet is a network namespace of a test's own whose only way out is a
// veth pair that goes nowhere: a process in it that reaches for an address
// outside loopback (a connection, a datagram, a DNS query to the resolver
// it is given, 192.0.2.53 of TEST-NET-1) sends a packet there, which the
// namespace's own mangle OUTPUT chain counts (by DNS, TCP and anything
// else, IPv4 and IPv6; the kernel's own IGMP and ICMPv6 neighbour and
// router traffic aside), and nothing leaves the machine. Removed with the
// test; one a killed test left is removed by the next.
type phoneNet struct{ name string }

// phoneChain is the counting chain in each namespace's mangle table.
const phoneChain = "LBPHONE"

func newPhoneNet(t *testing.T, tag string) *phoneNet {
	t.Helper()
	sweepPhoneNets()
	n := &phoneNet{name: fmt.Sprintf("lbph-%d-%s", os.Getpid(), tag)}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Skipf("no network namespace for the phone-home watch (root and ip netns needed): %v %s", err, out)
	}
	t.Cleanup(func() { removePhoneNet(n.name) })
	resolv := filepath.Join("/etc/netns", n.name, "resolv.conf")
	if err := os.MkdirAll(filepath.Dir(resolv), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Everything outside goes to a gateway whose link address is known
	// for good (out1's): no neighbour lookup holds a packet back, each
	// one is sent, and arrives at out1, where nothing takes it.
	const gwMAC = "02:00:00:00:00:01"
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "out0", "address", "02:00:00:00:00:02", "type", "veth", "peer", "name", "out1", "address", gwMAC},
		{"ip", "link", "set", "out0", "up"},
		{"ip", "link", "set", "out1", "up"},
		{"ip", "addr", "add", "192.0.2.2/32", "dev", "out0"},
		{"ip", "route", "add", "192.0.2.1", "dev", "out0"},
		{"ip", "neigh", "add", "192.0.2.1", "lladdr", gwMAC, "dev", "out0", "nud", "permanent"},
		{"ip", "route", "add", "default", "via", "192.0.2.1"},
		{"ip", "-6", "addr", "add", "2001:db8::2/128", "dev", "out0", "nodad"},
		{"ip", "-6", "route", "add", "2001:db8::1", "dev", "out0"},
		{"ip", "-6", "neigh", "add", "2001:db8::1", "lladdr", gwMAC, "dev", "out0", "nud", "permanent"},
		{"ip", "-6", "route", "add", "default", "via", "2001:db8::1"},
	}
	for _, ipt := range []struct{ cmd, loop, kernel string }{{"iptables", "127.0.0.0/8", "igmp"}, {"ip6tables", "::1/128", "ipv6-icmp"}} {
		rule := func(args ...string) []string {
			return append([]string{ipt.cmd, "-w", "-t", "mangle"}, args...)
		}
		steps = append(steps,
			rule("-N", phoneChain),
			rule("-A", "OUTPUT", "-j", phoneChain),
			rule("-A", phoneChain, "-d", ipt.loop, "-j", "RETURN"),
			rule("-A", phoneChain, "-p", ipt.kernel, "-j", "RETURN"),
			rule("-A", phoneChain, "-p", "udp", "--dport", "53", "-m", "comment", "--comment", "dns", "-j", "RETURN"),
			rule("-A", phoneChain, "-p", "tcp", "--dport", "53", "-m", "comment", "--comment", "dns", "-j", "RETURN"),
			rule("-A", phoneChain, "-p", "tcp", "-m", "comment", "--comment", "tcp", "-j", "RETURN"),
			rule("-A", phoneChain, "-m", "comment", "--comment", "other", "-j", "RETURN"))
	}
	for _, s := range steps {
		if out, err := n.cmd(s...).CombinedOutput(); err != nil {
			t.Fatalf("%s in %s: %v %s", strings.Join(s, " "), n.name, err, out)
		}
	}
	return n
}

// cmd is a command run inside the namespace.
func (n *phoneNet) cmd(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name}, args...)...)
}

// counts reads how many packets of each kind ("ipv4 dns", "ipv6 tcp" ...)
// went for outside since the last zero.
func (n *phoneNet) counts(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, ipt := range []struct{ cmd, family string }{{"iptables", "ipv4"}, {"ip6tables", "ipv6"}} {
		b, err := n.cmd(ipt.cmd, "-w", "-t", "mangle", "-L", phoneChain, "-v", "-x", "-n").Output()
		if err != nil {
			t.Fatalf("%s -L %s in %s: %v", ipt.cmd, phoneChain, n.name, err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			i := strings.Index(sc.Text(), "/* ")
			if len(f) == 0 || i < 0 {
				continue
			}
			what, _, _ := strings.Cut(sc.Text()[i+3:], " */")
			pkts, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Fatalf("counters of %s: %q", n.name, sc.Text())
			}
			out[ipt.family+" "+what] += pkts
		}
	}
	return out
}

// capture records every IP packet the namespace sends out (what arrives at
// the far end of its veth), described ("udp 192.0.2.2:41000 ->
// 192.0.2.53:53 DNS query checkpoint-api.hashicorp.com"): the figures of a
// count that is not zero.
type capture struct {
	f    *os.File
	mu   sync.Mutex
	seen []string
	done chan struct{}
}

func (n *phoneNet) capture(t *testing.T) *capture {
	t.Helper()
	fd, err := packetSocket(n.name, "out1")
	if err != nil {
		t.Fatalf("capture in %s: %v", n.name, err)
	}
	c := &capture{f: os.NewFile(uintptr(fd), "capture-"+n.name), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 65536)
		for {
			k, err := c.f.Read(buf)
			if err != nil {
				return
			}
			if d := describePacket(buf[:k]); d != "" {
				c.mu.Lock()
				c.seen = append(c.seen, d)
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

// packets is what was captured since the last call.
func (c *capture) packets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = nil
	return out
}

func (c *capture) close() {
	c.f.Close()
	<-c.done
}

// packetSocket opens, inside the namespace, a packet socket on the
// device's incoming side (a thread of its own enters the namespace, and
// leaves it before it is given back).
func packetSocket(netns, dev string) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", netns))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		fd, err := func() (int, error) {
			ifi, err := net.InterfaceByName(dev)
			if err != nil {
				return -1, err
			}
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
			if err != nil {
				return -1, err
			}
			if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
				unix.Close(fd)
				return -1, err
			}
			return fd, nil
		}()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, errors.Join(err, errors.New("the thread stays in the namespace: it ends with this goroutine"))}
			return // locked: the runtime ends the thread
		}
		runtime.UnlockOSThread()
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// describePacket says what an IP packet is (its addresses, protocol and
// ports, a DNS query's name), or "" for the kernel's own IGMP and ICMPv6
// and anything not IP.
func describePacket(p []byte) string {
	if len(p) < 1 {
		return ""
	}
	var src, dst net.IP
	var proto int
	var rest []byte
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return ""
		}
		ihl := int(p[0]&0x0f) * 4
		if len(p) < ihl {
			return ""
		}
		src, dst, proto, rest = net.IP(p[12:16]), net.IP(p[16:20]), int(p[9]), p[ihl:]
	case 6:
		if len(p) < 40 {
			return ""
		}
		src, dst, proto, rest = net.IP(p[8:24]), net.IP(p[24:40]), int(p[6]), p[40:]
	default:
		return ""
	}
	switch proto {
	case 2, 58: // IGMP, ICMPv6: the kernel's
		return ""
	case 6, 17:
		if len(rest) < 4 {
			break
		}
		sp, dp := int(rest[0])<<8|int(rest[1]), int(rest[2])<<8|int(rest[3])
		name := map[int]string{6: "tcp", 17: "udp"}[proto]
		d := fmt.Sprintf("%s %s -> %s", name, net.JoinHostPort(src.String(), strconv.Itoa(sp)), net.JoinHostPort(dst.String(), strconv.Itoa(dp)))
		if proto == 17 && dp == 53 && len(rest) > 8+12 {
			d += " DNS query " + dnsName(rest[8+12:])
		}
		return d
	}
	return fmt.Sprintf("protocol %d %s -> %s", proto, src, dst)
}

// dnsName reads the first question's name of a DNS message's body.
func dnsName(b []byte) string {
	var labels []string
	for len(b) > 0 && b[0] != 0 && int(b[0]) < len(b) && len(labels) < 64 {
		labels = append(labels, string(b[1:1+int(b[0])]))
		b = b[1+int(b[0]):]
	}
	return strings.Join(labels, ".")
}

// dnsCounted reports whether a listing of the IPv4 chain counted a DNS
// packet.
func dnsCounted(listing string) bool {
	for _, line := range strings.Split(listing, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(line, "/* dns */") && f[0] != "0" {
			return true
		}
	}
	return false
}

// openToOutside lists the sockets of the namespace listening (TCP) or
// bound (UDP) on an address that is not loopback: the wildcard or out0's,
// reachable from outside on a machine's real interfaces.
func (n *phoneNet) openToOutside() []string {
	var out []string
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := n.cmd("cat", "/proc/net/"+f).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || (strings.HasPrefix(f, "tcp") && fs[3] != "0A") {
				continue // not a listener
			}
			hexIP, port, _ := strings.Cut(fs[1], ":")
			if ip := procIP(hexIP); ip != nil && !ip.IsLoopback() {
				p, _ := strconv.ParseUint(port, 16, 16)
				out = append(out, fmt.Sprintf("%s %s", f, net.JoinHostPort(ip.String(), strconv.Itoa(int(p)))))
			}
		}
	}
	return out
}

// procIP reads an address of /proc/net/{tcp,udp}[6]: 32-bit words in the
// host's (little-endian) order.
func procIP(h string) net.IP {
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil
		}
		b[i] = byte(v)
	}
	if len(b) != 4 && len(b) != 16 {
		return nil
	}
	for w := 0; w < len(b); w += 4 {
		b[w], b[w+1], b[w+2], b[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	return net.IP(b)
}

// zero resets the namespace's counters.
func (n *phoneNet) zero(t *testing.T) {
	t.Helper()
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if out, err := n.cmd(ipt, "-w", "-t", "mangle", "-Z", phoneChain).CombinedOutput(); err != nil {
			t.Fatalf("%s -Z in %s: %v %s", ipt, n.name, err, out)
		}
	}
}

// total is every packet counted.
func total(c map[string]int64) (n int64) {
	for _, v := range c {
		n += v
	}
	return n
}

func removePhoneNet(name string) {
	exec.Command("ip", "netns", "del", name).Run()
	os.RemoveAll(filepath.Join("/etc/netns", name))
}

// sweepPhoneNets removes the namespaces of phone-home tests that are gone
// (killed before their cleanup).
func sweepPhoneNets() {
	b, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "lbph-") {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(f[0], "lbph-%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			continue
		}
		removePhoneNet(f[0])
	}
}

// phoneHomeScenario runs a case on every kind of server lockbench starts;
// Consul's lasts longer than the 30 s within which an agent with its update
// check on would make it (consul's command/agent: "Do an immediate check
// within the next 30 seconds").
const phoneHomeScenario = `
name: phonehome
seed: 1
workload: {duration: 1s, instances: 1, clients: 1}
cases:
  - {name: consul, backend: consul, workload: {duration: 32s}}
  - {name: redis, backend: redis}
  - {name: sentinel, backend: redis-sentinel}
  - {name: etcd, backend: etcd}
  - {name: zookeeper, backend: zookeeper}
  - {name: postgres, backend: postgres}
`

// TestRunPhonesNobody: a real run, with a case on every kind of server
// lockbench starts, inside a namespace where every packet for outside
// loopback is counted, sends none: no connection, no datagram, no DNS
// query (issue 41). The watch is shown to see what it is for: a lookup and
// a connection from inside the namespace are counted, and so is the update
// check of a Consul agent started without lockbench's flags, in a
// namespace of its own beside the run: the DNS query the issue saw.
func TestRunPhonesNobody(t *testing.T) {
	integration(t)
	k, err := cluster.LookupKind("consul")
	if err != nil {
		t.Fatal(err)
	}
	consul, err := k.Binary()
	if err != nil {
		t.Skip(err)
	}
	run, control := newPhoneNet(t, "run"), newPhoneNet(t, "control")
	seen := run.capture(t)

	// The watch sees a lookup and a connection.
	run.cmd("timeout", "2", "getent", "ahosts", "lockbench-phonehome.example.com").Run()
	run.cmd("timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/192.0.2.9/443").Run()
	if c := run.counts(t); c["ipv4 dns"] == 0 || c["ipv4 tcp"] == 0 {
		t.Fatalf("a DNS lookup and a connection from inside the namespace were not counted: %v", c)
	}
	run.zero(t)
	// And a listener on every interface.
	wide := run.cmd("python3", "-c", "import socket,time; s=socket.socket(); s.bind(('0.0.0.0', 47123)); s.listen(); time.sleep(30)")
	if err := wide.Start(); err != nil {
		t.Fatalf("a listener for the control: %v", err)
	}
	{
		found := false
		for end := time.Now().Add(time.Minute); !found && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			found = slices.Contains(run.openToOutside(), "tcp 0.0.0.0:47123")
		}
		wide.Process.Kill()
		wide.Wait()
		if !found {
			t.Fatalf("a listener on 0.0.0.0:47123 in the namespace was not seen: %v", run.openToOutside())
		}
	}
	if p := strings.Join(seen.packets(), "\n"); !strings.Contains(p, "DNS query lockbench-phonehome.example.com") || !strings.Contains(p, "-> 192.0.2.9:443") {
		t.Errorf("the capture did not see the lookup and the connection:\n%s", p)
	}

	// The phone-home, beside the run: an agent as Consul starts by
	// default.
	data := t.TempDir()
	agent := control.cmd(consul, "agent", "-server", "-bootstrap-expect=1", "-node=phonehome-control",
		"-bind=127.0.0.1", "-client=127.0.0.1", "-data-dir="+data)
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(t.TempDir(), "consul.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	agent.Stdout, agent.Stderr = logf, logf
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	defer func() {
		syscall.Kill(-agent.Process.Pid, syscall.SIGKILL)
		agent.Wait()
	}()
	// When the agent's query came, watched beside the run (Consul makes
	// it within 30 s of its start; a minute for a slow machine).
	seenAt := make(chan time.Duration, 1)
	go func() {
		defer close(seenAt)
		for time.Since(started) < time.Minute {
			if b, err := control.cmd("iptables", "-w", "-t", "mangle", "-L", phoneChain, "-v", "-x", "-n").Output(); err == nil && dnsCounted(string(b)) {
				seenAt <- time.Since(started)
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()

	// Every listener of the run on loopback, watched while it runs.
	stop, listened := make(chan struct{}), make(chan map[string]bool)
	go func() {
		open := map[string]bool{}
		defer func() { listened <- open }()
		for {
			for _, l := range run.openToOutside() {
				open[l] = true
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	dir := filepath.Join(t.TempDir(), "out")
	bench := run.cmd(append([]string{"env", envBeBench + "=1", os.Args[0]}, "run", "-dir", dir, writeScenario(t, phoneHomeScenario))...)
	out, err := bench.CombinedOutput()
	if err != nil {
		t.Fatalf("the run in the namespace: %v\n%s", err, out)
	}
	close(stop)
	if open := <-listened; len(open) > 0 {
		t.Errorf("the run listened outside loopback: %v", open)
	}
	if c := run.counts(t); total(c) != 0 {
		t.Errorf("the run sent %d packet(s) outside loopback: %v:\n  %s\n%s", total(c), c, strings.Join(seen.packets(), "\n  "), out)
	}
	cases := byCase(readSummary(t, dir))
	for _, name := range []string{"consul", "redis", "sentinel", "etcd", "zookeeper", "postgres"} {
		if c, ok := cases[name]; !ok || c.Check.Status != "ok" || c.Metrics.Acquisitions == 0 {
			t.Errorf("case %s: %s, %d acquisitions: every server kind must have served the run\n%s", name, c.Check.Status, c.Metrics.Acquisitions, out)
		}
	}
	if at, ok := <-seenAt; !ok {
		b, _ := os.ReadFile(logf.Name())
		t.Errorf("a Consul agent started without lockbench's flags made no DNS query the watch saw in a minute: %v\n%s", control.counts(t), b)
	} else {
		t.Logf("the watch saw the update check of a Consul agent started without lockbench's flags %s after its start: %v", at.Round(100*time.Millisecond), control.counts(t))
	}
}
