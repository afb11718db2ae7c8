package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ChainPrefix names the iptables chains lockbench creates: one per harness
// process, LOCKBENCH-<pid>, so concurrent runs never touch each other's
// rules and a chain left by a killed harness can be recognised.
const ChainPrefix = "LOCKBENCH-"

// ErrNoFirewall means address-level partitions cannot be made here.
var ErrNoFirewall = errors.New("address-level partitions are unavailable")

// FirewallAvailable says whether iptables partitions can be used: they need
// root and the iptables binary.
func FirewallAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: iptables rules need root", ErrNoFirewall)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("%w: iptables is not installed (`apt-get install -y iptables`, or `make setup` as root)", ErrNoFirewall)
	}
	return nil
}

// Firewall cuts traffic between loopback addresses with iptables DROP rules
// in this process's own chain, jumped to from OUTPUT (on loopback every
// packet passes OUTPUT). It cuts TCP and UDP alike, which toxiproxy cannot
// (Consul's gossip is UDP). It works only between endpoints whose sockets
// use their own address as source (worker instances always do); every
// address is in the run's own slot, so no rule can touch another run.
// Close removes the jump, the rules and the chain.
type Firewall struct {
	mu      sync.Mutex
	chain   string
	created bool
	next    int
}

// Endpoint is one side of a rule: an address, and a TCP port or 0 for
// every port and protocol.
type Endpoint struct {
	IP   string
	Port int
	// Proto limits a rule to "tcp" or "udp" packets ("": every protocol).
	Proto string
	// Mark, for a worker instance, is the mark its connections carry
	// (SO_MARK; InstanceMark), or 0. A worker's connection to a server on
	// another host leaves from this machine's own address, not from the
	// instance's loopback one, so a rule singles the instance out by its
	// mark: what it sends by the packet's mark, what it receives by the
	// mark its connections' conntrack entries were given (CONNMARK).
	Mark int
}

// markBase is the top byte of every instance mark ('L'); markMask
// selects it. A mark is markBase | slot<<16 | instance: unique on the
// machine among live runs, as slots are.
const (
	markBase = 0x4c000000
	markMask = 0xff000000
)

// instanceMark is the mark of instance n's connections in slot.
func instanceMark(slot, n int) int { return markBase | (slot&0xff)<<16 | n&0xffff }

func (e Endpoint) String() string {
	if e.Port == 0 {
		return e.IP
	}
	return fmt.Sprintf("%s:%d", e.IP, e.Port)
}

// Rule is one DROP rule in force.
type Rule struct {
	f       *Firewall
	spec    []string
	comment string
}

// NewFirewall returns the firewall of this process; nothing is created
// until the first rule.
func NewFirewall() *Firewall {
	return &Firewall{chain: fmt.Sprintf("%s%d", ChainPrefix, os.Getpid())}
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (f *Firewall) ensure() error {
	if f.created {
		return nil
	}
	if err := FirewallAvailable(); err != nil {
		return err
	}
	if err := iptables("-N", f.chain); err != nil {
		return err
	}
	// What arrives from another host passes INPUT (on loopback every
	// packet passes OUTPUT, and is not seen twice); the first rule gives
	// the connections of marked instances their mark in conntrack, so
	// that what comes back to an instance can be recognised.
	for _, args := range [][]string{
		{"-A", f.chain, "-m", "mark", "--mark", fmt.Sprintf("%#x/%#x", markBase, markMask), "-j", "CONNMARK", "--save-mark"},
		append([]string{"-I", "OUTPUT"}, jumpOut(f.chain)...),
		append([]string{"-I", "INPUT"}, jumpIn(f.chain)...),
	} {
		if err := iptables(args...); err != nil {
			removeChain(f.chain)
			return err
		}
	}
	f.created = true
	return nil
}

// jumpOut and jumpIn are the jumps to a harness's chain from OUTPUT and
// from INPUT (for packets from other hosts only).
func jumpOut(chain string) []string { return []string{"-j", chain} }
func jumpIn(chain string) []string  { return []string{"!", "-i", "lo", "-j", chain} }

// Drop cuts packets from src to dst (one direction). A port on either side
// restricts the rule to TCP packets from or to that port.
func (f *Firewall) Drop(src, dst Endpoint) (*Rule, error) { return f.DropSome(src, dst, 1) }

// DropSome drops each packet from src to dst with probability p (1: all).
func (f *Firewall) DropSome(src, dst Endpoint, p float64) (*Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.ensure(); err != nil {
		return nil, err
	}
	f.next++
	r := &Rule{f: f, comment: fmt.Sprintf("lockbench-%d", f.next)}
	r.spec = dropSpec(src, dst, p, r.comment)
	if err := iptables(append([]string{"-A", f.chain}, r.spec...)...); err != nil {
		return nil, err
	}
	return r, nil
}

// dropSpec is the iptables rule (after the chain) that drops a share p of
// the packets from src to dst, tagged with comment: the one rule every
// firewall of the harness's writes (here, in a host's namespace, on a
// remote host).
//
// A marked instance on one side and a server off loopback on the other
// are matched by the mark (see Endpoint.Mark): what the instance sends by
// its packets' mark, what it receives by its connections' conntrack mark.
func dropSpec(src, dst Endpoint, p float64, comment string) []string {
	spec := []string{"-s", src.IP, "-d", dst.IP}
	switch {
	case src.Mark != 0 && !isLoopback(dst.IP):
		spec = []string{"-m", "mark", "--mark", fmt.Sprintf("%#x", src.Mark), "-d", dst.IP}
	case dst.Mark != 0 && !isLoopback(src.IP):
		spec = []string{"-s", src.IP, "-m", "connmark", "--mark", fmt.Sprintf("%#x", dst.Mark)}
	}
	if pr := proto(src, dst); pr != "" {
		spec = append(spec, "-p", pr)
	}
	if src.Port != 0 {
		spec = append(spec, "--sport", fmt.Sprint(src.Port))
	}
	if dst.Port != 0 {
		spec = append(spec, "--dport", fmt.Sprint(dst.Port))
	}
	spec = append(spec, probability(p)...)
	return append(spec, "-m", "comment", "--comment", comment, "-j", "DROP")
}

// isLoopback reports whether ip is a loopback address.
func isLoopback(ip string) bool {
	a := net.ParseIP(ip)
	return a != nil && a.IsLoopback()
}

// proto is the protocol a rule between src and dst is limited to: the one
// asked for, or TCP when a port is given.
func proto(src, dst Endpoint) string {
	switch {
	case dst.Proto != "":
		return dst.Proto
	case src.Proto != "":
		return src.Proto
	case src.Port != 0 || dst.Port != 0:
		return "tcp"
	}
	return ""
}

// probability is the iptables match that applies a rule to a random share
// p of the packets (none for p >= 1).
func probability(p float64) []string {
	if p >= 1 {
		return nil
	}
	return []string{"-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(p, 'f', 4, 64)}
}

// Undo removes the rule.
func (r *Rule) Undo() error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if !r.f.created {
		return nil
	}
	return iptables(append([]string{"-D", r.f.chain}, r.spec...)...)
}

// Packets returns how many packets the rule has dropped.
func (r *Rule) Packets() (int64, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	out, err := exec.Command("iptables", "-w", "-L", r.f.chain, "-v", "-x", "-n").Output()
	if err != nil {
		return 0, fmt.Errorf("read counters of %s: %w", r.f.chain, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "/* "+r.comment+" */") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				break
			}
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("rule %s not found in %s", r.comment, r.f.chain)
}

// Close removes the jump, every rule and the chain.
func (f *Firewall) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.created {
		return nil
	}
	f.created = false
	return removeChain(f.chain)
}

func removeChain(chain string) error {
	var errs []error
	// The jumps may have been inserted more than once by a crashed run.
	for iptables(append([]string{"-D", "OUTPUT"}, jumpOut(chain)...)...) == nil {
	}
	for iptables(append([]string{"-D", "INPUT"}, jumpIn(chain)...)...) == nil {
	}
	if err := iptables("-F", chain); err != nil {
		errs = append(errs, err)
	}
	if err := iptables("-X", chain); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CleanStaleChains removes the chains of harnesses that are no longer
// running (a harness killed with SIGKILL could not remove its own).
func CleanStaleChains() error {
	if FirewallAvailable() != nil {
		return nil
	}
	out, err := exec.Command("iptables", "-w", "-S").Output()
	if err != nil {
		return fmt.Errorf("list iptables chains: %w", err)
	}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		chain, ok := strings.CutPrefix(sc.Text(), "-N "+ChainPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(chain)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // that harness still runs
		}
		// Two runs starting together may both remove a dead run's chain:
		// one that is gone by the end was removed, whoever did it.
		if err := removeChain(ChainPrefix + chain); err != nil && exec.Command("iptables", "-w", "-S", ChainPrefix+chain).Run() == nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
