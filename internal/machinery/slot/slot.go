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
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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
	// legacy is the slot's lock in the old shared directory, held too
	// when it could be taken (holdLegacy).
	legacy *os.File
	// hosts: the slot's addresses are 10.(64+n).0.0/16 on the run's own
	// bridge, each server and instance in a namespace of its own.
	hosts bool
}

// SlotDir is where the slot lock files live: one fixed place per user of
// the machine (not $TMPDIR, which two runs may set differently). Root's
// is /run/lockbench/slots, root's own and not writable by others, its
// files 0600: no other user can open one, so none can flock it and hold
// root's runs hostage. Another user's is /tmp/lockbench-slots-<uid>, 0700.
func SlotDir() string {
	if os.Geteuid() == 0 {
		return rootDir
	}
	return fmt.Sprintf("/tmp/lockbench-slots-%d", os.Geteuid())
}

// rootDir is root's slot directory; legacyDir the one every user shared
// before (any user could lock all of its files). Variables for the tests.
var (
	rootDir   = "/run/lockbench/slots"
	legacyDir = "/tmp/lockbench-slots"
)

// safeDir makes dir (and its parent, for root's) when missing and checks it
// is a directory of this user's own that no other user can write to, and
// not a symbolic link: a directory another user planted is refused.
func safeDir(dir string, mode os.FileMode) error {
	uid := os.Geteuid()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if d == filepath.Dir(d) || (d == filepath.Dir(dir) && os.Geteuid() != 0) {
			continue // the parent of another user's is /tmp
		}
		if err := os.Mkdir(d, mode); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("address slots: %w", err)
		}
		st, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("address slots: %w", err)
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		switch {
		case !st.IsDir():
			return fmt.Errorf("address slots: %s is not a directory (%s): refusing it", d, st.Mode())
		case sys == nil || int(sys.Uid) != uid:
			return fmt.Errorf("address slots: %s belongs to uid %d, not to this user (uid %d): refusing a directory another user made", d, sys.Uid, uid)
		case st.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("address slots: %s is writable by others (%s): refusing it", d, st.Mode().Perm())
		}
	}
	return nil
}

// Acquire takes the first free slot, on loopback.
func Acquire() (*Slot, error) {
	dir := SlotDir()
	if err := safeDir(dir, 0o755); err != nil {
		return nil, err
	}
	for n := 0; n < Slots; n++ {
		path := filepath.Join(dir, fmt.Sprintf("slot-%d.lock", n))
		fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("address slot %d: %s: %w", n, path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil && inUse(n) {
			f.Close() // a dead run's server still exiting: the next slot
			continue
		}
		if err == nil {
			if heldElsewhere(n) {
				f.Close()
				continue
			}
			return &Slot{N: n, f: f, legacy: holdLegacy(n)}, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock address slot %d: %w", n, err)
		}
	}
	return nil, fmt.Errorf("all %d address slots are in use: %d lockbench runs at once on this machine", Slots, Slots)
}

// holdLegacy takes slot n's lock in the legacy shared directory too, when
// it can, so that an older lockbench binary on the machine sees the slot
// taken (it would otherwise take it, and remove this run's namespaces and
// chains as a dead run's). A lock a stranger holds there was ignored by
// heldElsewhere: then there is nothing to take.
func holdLegacy(n int) *os.File {
	path := filepath.Join(legacyDir, fmt.Sprintf("slot-%d.lock", n))
	flags := syscall.O_RDWR | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	// Create it only in a real directory of root's (an older binary's), never
	// through a link another user planted.
	if st, err := os.Lstat(legacyDir); err == nil && st.IsDir() && os.Geteuid() == 0 {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == 0 {
			flags |= syscall.O_CREAT
		}
	}
	fd, err := syscall.Open(path, flags, 0o644)
	if err != nil {
		return nil
	}
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		syscall.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), path)
}

// heldElsewhere reports whether slot n is held in another directory by a
// run that counts: in root's by root (for a run of another user), in the
// legacy shared directory (older lockbench binaries) by root or this user.
// A lock another non-root user holds there is ignored: it may be held only
// to keep every run out.
func heldElsewhere(n int) bool {
	name := fmt.Sprintf("slot-%d.lock", n)
	uid := os.Geteuid()
	if uid != 0 {
		for _, h := range flockHolders(filepath.Join(rootDir, name)) {
			if h == 0 {
				return true
			}
		}
	}
	for _, h := range flockHolders(filepath.Join(legacyDir, name)) {
		if h == 0 || h == uid {
			return true
		}
	}
	return false
}

// flockHolders returns the uids of the processes that hold an flock on the
// file at path (as /proc/locks says), without opening it; none when it
// is missing or a symbolic link.
func flockHolders(path string) []int {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	sys := st.Sys().(*syscall.Stat_t)
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(sys.Dev), unix.Minor(sys.Dev), sys.Ino)
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	var uids []int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// "1: FLOCK  ADVISORY  WRITE 1465 fe:00:762138 0 EOF"; a waiter's
		// line has "->" after the number.
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != id {
			continue
		}
		if u, ok := uidOf(f[4]); ok {
			uids = append(uids, u)
		}
	}
	return uids
}

// uidOf returns the real uid of process pid.
func uidOf(pid string) (int, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			u, err := strconv.Atoi(f[1])
			return u, err == nil
		}
	}
	return 0, false
}

// Hold takes slot n itself when nobody holds it (a run cleaning what a
// killed run left on a free slot holds it meanwhile), opened as Acquire
// opens a slot's lock: no link followed, no other user's lock honoured.
func Hold(n int) (*Slot, bool) {
	if n < 0 || n >= Slots {
		return nil, false
	}
	dir := SlotDir()
	if err := safeDir(dir, 0o755); err != nil {
		return nil, false
	}
	path := filepath.Join(dir, fmt.Sprintf("slot-%d.lock", n))
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), path)
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil || heldElsewhere(n) {
		f.Close()
		return nil, false
	}
	return &Slot{N: n, f: f, legacy: holdLegacy(n)}, true
}

// Release gives the slot back; safe to call more than once.
func (s *Slot) Release() {
	if s != nil && s.f != nil {
		s.f.Close() // closing the only descriptor drops the flock
		s.f = nil
	}
	if s != nil && s.legacy != nil {
		s.legacy.Close()
		s.legacy = nil
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
