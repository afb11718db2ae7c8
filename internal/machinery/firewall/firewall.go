// Package firewall cuts traffic with iptables DROP rules in a chain of
// the harness's own (LOCKBENCH-<pid>), jumped to from OUTPUT and INPUT, so
// that concurrent runs never touch each other's rules and a chain left by
// a killed harness can be recognised and removed. It writes the one rule
// every cut of lockbench's is made of (Spec): in this machine's chain
// here, in a host's network namespace (package netns) and on a remote
// host's chain (package remote).
package firewall

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

// ErrUnavailable means address-level partitions cannot be made here.
var ErrUnavailable = errors.New("address-level partitions are unavailable")

// Available says whether iptables partitions can be used: they need
// root and the iptables binary.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: iptables rules need root", ErrUnavailable)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("%w: iptables is not installed (`apt-get install -y iptables`, or `make setup` as root)", ErrUnavailable)
	}
	return nil
}

// Chain cuts traffic between loopback addresses with iptables DROP rules
// in this process's own chain, jumped to from OUTPUT (on loopback every
// packet passes OUTPUT). It cuts TCP and UDP alike, which toxiproxy cannot
// (Consul's gossip is UDP). It works only between endpoints whose sockets
// use their own address as source (worker instances always do); every
// address is in the run's own slot, so no rule can touch another run.
// Close removes the jump, the rules and the chain.
type Chain struct {
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

// InstanceMark is the mark of instance n's connections in slot n.
func InstanceMark(slot, n int) int { return markBase | (slot&0xff)<<16 | n&0xffff }

// String writes the endpoint as ip or ip:port.
func (e Endpoint) String() string {
	if e.Port == 0 {
		return e.IP
	}
	return fmt.Sprintf("%s:%d", e.IP, e.Port)
}

// Cut is a rule in force, wherever it was made: this machine's chain (a
// Rule), a host's network namespace, a remote host's chain, an outside
// injector's object (faults.Cut).
type Cut interface {
	// Packets is how many packets the rule has dropped so far.
	Packets() (int64, error)
	// Undo removes the rule.
	Undo() error
}

// Rule is one DROP rule in force in this machine's chain.
type Rule struct {
	f       *Chain
	spec    []string
	comment string
}

// New returns the chain of this process; nothing is created until the
// first rule.
func New() *Chain { return &Chain{chain: Name(os.Getpid())} }

// Name is the chain of the harness of process pid: LOCKBENCH-<pid>.
func Name(pid int) string { return fmt.Sprintf("%s%d", ChainPrefix, pid) }

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (f *Chain) ensure() error {
	if f.created {
		return nil
	}
	if err := Available(); err != nil {
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
		append([]string{"-I", "OUTPUT"}, JumpOut(f.chain)...),
		append([]string{"-I", "INPUT"}, JumpIn(f.chain)...),
	} {
		if err := iptables(args...); err != nil {
			removeChain(f.chain)
			return err
		}
	}
	f.created = true
	return nil
}

// JumpOut and JumpIn are the jumps to a harness's chain from OUTPUT and
// from INPUT (for packets from other hosts only).
func JumpOut(chain string) []string { return []string{"-j", chain} }
func JumpIn(chain string) []string  { return []string{"!", "-i", "lo", "-j", chain} }

// Drop cuts packets from src to dst (one direction). A port on either side
// restricts the rule to TCP packets from or to that port.
func (f *Chain) Drop(src, dst Endpoint) (*Rule, error) { return f.DropSome(src, dst, 1) }

// DropSome drops each packet from src to dst with probability p (1: all).
func (f *Chain) DropSome(src, dst Endpoint, p float64) (*Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.ensure(); err != nil {
		return nil, err
	}
	f.next++
	r := &Rule{f: f, comment: fmt.Sprintf("lockbench-%d", f.next)}
	r.spec = Spec(src, dst, p, r.comment)
	if err := iptables(append([]string{"-A", f.chain}, r.spec...)...); err != nil {
		return nil, err
	}
	return r, nil
}

// Spec is the iptables rule (after the chain) that drops a share p of
// the packets from src to dst, tagged with comment: the one rule every
// firewall of the harness's writes (here, in a host's namespace, on a
// remote host).
//
// A marked instance on one side and a server off loopback on the other
// are matched by the mark (see Endpoint.Mark): what the instance sends by
// its packets' mark, what it receives by its connections' conntrack mark.
func Spec(src, dst Endpoint, p float64, comment string) []string {
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
	return Packets(string(out), r.comment, r.f.chain)
}

// Packets reads, from a chain's listing (iptables -L <chain> -v -x -n),
// how many packets the rule tagged with comment has dropped; where names
// the chain in the error when there is no such rule.
func Packets(listing, comment, where string) (int64, error) {
	for _, line := range strings.Split(listing, "\n") {
		if strings.Contains(line, "/* "+comment+" */") {
			if f := strings.Fields(line); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("rule %s not found in %s", comment, where)
}

// Close removes the jump, every rule and the chain.
func (f *Chain) Close() error {
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
	for iptables(append([]string{"-D", "OUTPUT"}, JumpOut(chain)...)...) == nil {
	}
	for iptables(append([]string{"-D", "INPUT"}, JumpIn(chain)...)...) == nil {
	}
	if err := iptables("-F", chain); err != nil {
		errs = append(errs, err)
	}
	if err := iptables("-X", chain); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RemoveScript is the shell command that removes a harness's chain on
// a host, as Close does here: every jump to it (a crashed run may have
// inserted one more than once), its rules and the chain.
func RemoveScript(chain string) string {
	return fmt.Sprintf("while iptables -w -D OUTPUT %[2]s 2>/dev/null; do :; done; while iptables -w -D INPUT %[3]s 2>/dev/null; do :; done; iptables -w -F %[1]s && iptables -w -X %[1]s",
		chain, strings.Join(JumpOut(chain), " "), strings.Join(JumpIn(chain), " "))
}

// CleanStale removes the chains of harnesses that are no longer
// running (a harness killed with SIGKILL could not remove its own).
func CleanStale() error {
	if Available() != nil {
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
