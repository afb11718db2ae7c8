// Package slot gives each run a share of the machine's addresses: a /16
// of its own, held by an flock the kernel releases when its holder dies.
// Two runs on one machine never bind the same address, reach each
// other's servers, or write a firewall rule that touches the other's.
package slot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Slots is how many runs can hold an address range at once.
const Slots = 128

// slotBase is the second octet of slot 0: slot n owns 127.(64+n).0.0/16.
const slotBase = 64

// Slot is one run's share of the loopback network: 127.(64+n).0.0/16, held
// by an exclusive flock on a file named after n. Two runs on one machine (two
// CI jobs on one runner) therefore never bind the same address, never reach
// each other's servers, and iptables rules written with these addresses
// never touch another run. The kernel drops the lock when its holder dies,
// even by SIGKILL, so a crashed run cannot keep its slot.
//
// Within a slot, 127.X.0.1 is the harness (toxiproxy and the protected
// resource), 127.X.0.10 and up are servers, and 127.X.1.N is worker
// instance N, whose clients use it as their source address.
type Slot struct {
	N int
	f *os.File
	// hosts: the slot's addresses are 10.(64+n).0.0/16 on the run's own
	// bridge, each server and instance in a namespace of its own.
	hosts bool
}

// SlotDir is where the slot lock files live: one fixed place for the
// whole machine (not $TMPDIR, which two runs may set differently).
func SlotDir() string { return "/tmp/lockbench-slots" }

// Acquire takes the first free slot, on loopback.
func Acquire() (*Slot, error) {
	dir := SlotDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("address slots: %w", err)
	}
	for n := 0; n < Slots; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%d.lock", n)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, fmt.Errorf("address slot %d: %w", n, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil && inUse(n) {
			f.Close() // a dead run's server still exiting: the next slot
			continue
		}
		if err == nil {
			return &Slot{N: n, f: f}, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock address slot %d: %w", n, err)
		}
	}
	return nil, fmt.Errorf("all %d address slots are in use: %d lockbench runs at once on this machine", Slots, Slots)
}

// inUse reports whether a socket is bound to an address of slot n's
// loopback range (127.(64+n).0.0/16), TCP or UDP, IPv4 or IPv4-mapped. A
// slot's flock is free the moment its run dies, but the servers the
// parent-death signal stops may take seconds to exit (Consul leaves its
// cluster gracefully), longer on a busy machine: a run that took the slot
// then could not bind its own servers' addresses (seen: "listen tcp
// 127.64.0.10:8300: bind: address already in use").
func inUse(n int) bool {
	// /proc/net/tcp writes an IPv4 address as the hex of its four bytes
	// read as a little-endian word: 127.(64+n).c.d is "DDCC" + hex(64+n) + "7F".
	suffix := fmt.Sprintf("%02X7F:", slotBase+n)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 {
				continue
			}
			local, state := fields[1], fields[3]
			if i := strings.IndexByte(local, ':'); i < 8 || !strings.HasSuffix(local[:i+1], suffix) {
				continue
			}
			// TCP: listening (0A) or connected from a bound port that a
			// live process holds; UDP: any bound socket (07). TIME_WAIT
			// (06) and the like belong to no process.
			if state == "0A" || state == "07" || state == "01" {
				if strings.HasSuffix(f, "tcp6") || strings.HasSuffix(f, "udp6") {
					if !strings.HasPrefix(local, "0000000000000000FFFF0000") {
						continue
					}
				}
				return true
			}
		}
	}
	return false
}

// Hold takes slot n if nobody holds it now, for a moment: to remove what
// a killed run of that slot left while no run can take it. false when
// another run holds it (or its lock file cannot be opened).
func Hold(n int) (*Slot, bool) {
	if n < 0 || n >= Slots {
		return nil, false
	}
	f, err := os.OpenFile(filepath.Join(SlotDir(), fmt.Sprintf("slot-%d.lock", n)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return &Slot{N: n, f: f}, true
}

// Release gives the slot back; safe to call more than once.
func (s *Slot) Release() {
	if s != nil && s.f != nil {
		s.f.Close() // closing the only descriptor drops the flock
		s.f = nil
	}
}

// Prefix is what every address of the slot starts with ("127.65.").
func (s *Slot) Prefix() string {
	if s.hosts {
		return fmt.Sprintf("10.%d.", slotBase+s.N)
	}
	return fmt.Sprintf("127.%d.", slotBase+s.N)
}

// Harness is the address of the coordinator's own listeners.
func (s *Slot) Harness() string { return s.Prefix() + "0.1" }

// Server is the address of the i-th server (1-based).
func (s *Slot) Server(i int) string { return fmt.Sprintf("%s0.%d", s.Prefix(), 9+i) }

// Instance is the source address of worker instance n (1-based).
func (s *Slot) Instance(n int) string { return fmt.Sprintf("%s1.%d", s.Prefix(), n) }

// Contains reports whether ip belongs to the slot.
func (s *Slot) Contains(ip string) bool {
	return len(ip) > len(s.Prefix()) && ip[:len(s.Prefix())] == s.Prefix()
}

// AcquireHosts takes a free slot whose addresses are a bridge's
// (10.(64+n).0.0/16), for hosts of their own (package netns): hosts mode,
// and the SSH control plane's test, which makes its "remote hosts" so.
func AcquireHosts() (*Slot, error) {
	s, err := Acquire()
	if err == nil {
		s.hosts = true
	}
	return s, err
}
