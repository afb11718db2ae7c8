package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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
// (Consul's gossip is UDP). It works only between servers whose sockets use
// their own address as source; Close removes the jump, the rules and the
// chain.
type Firewall struct {
	mu      sync.Mutex
	chain   string
	created bool
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
	if err := iptables("-I", "OUTPUT", "-j", f.chain); err != nil {
		iptables("-X", f.chain) // best effort: nothing is in it yet
		return err
	}
	f.created = true
	return nil
}

// Drop cuts packets from src to dst (one direction) and returns how to undo it.
func (f *Firewall) Drop(src, dst string) (undo func() error, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.ensure(); err != nil {
		return nil, err
	}
	rule := []string{"-s", src, "-d", dst, "-j", "DROP"}
	if err := iptables(append([]string{"-A", f.chain}, rule...)...); err != nil {
		return nil, err
	}
	return func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.created {
			return nil
		}
		return iptables(append([]string{"-D", f.chain}, rule...)...)
	}, nil
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
	// The jump may have been inserted more than once by a crashed run.
	for iptables("-D", "OUTPUT", "-j", chain) == nil {
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
		if err := removeChain(ChainPrefix + chain); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// BindsSource reports whether servers of kind use their own address as the
// source of connections to their peers, so that address-level partitions
// separate them. Consul does; ZooKeeper does not (its quorum connections
// come from 127.0.0.1), and etcd's peer links go through toxiproxy (use link
// faults on link:etcd-N-peer).
func BindsSource(kind string) bool { return kind == "consul" }
