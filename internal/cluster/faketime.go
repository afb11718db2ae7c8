package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Libfaketime is Debian's libfaketime, which moves the wall clock of the
// processes it is preloaded into (and of nothing else on the machine).
const Libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// FaketimeAvailable says whether a server's wall clock can be moved. A
// time namespace cannot do it (it offsets CLOCK_MONOTONIC and
// CLOCK_BOOTTIME only), and moving the machine's own clock would move every
// process's; libfaketime moves the clock of one dynamically linked program
// that reads it through libc. That rules out Go servers (etcd, Consul read
// the clock through the vDSO) and redis-server 7.0 (it aborts under
// libfaketime): their clock jumps are emulated where they can be.
func FaketimeAvailable() error {
	if _, err := os.Stat(Libfaketime); err != nil {
		return fmt.Errorf("libfaketime is not installed (apt-get install -y libfaketime, or make setup as root): %w", err)
	}
	return nil
}

// faketimeFile is where a server's clock offset is read from.
func (s *Server) faketimeFile() string { return filepath.Join(s.Dir, "faketime.rc") }

// useFaketime makes the server's processes read their wall clock through
// libfaketime, offset by what its faketime file says (+0 to begin with),
// re-read at every clock read; monotonic clocks are left alone.
//
// Re-reading the file at every clock read costs a few system calls a call,
// which only servers a clock-jump fault targets pay. With libfaketime's
// cache (FAKETIME_CACHE_DURATION, whole seconds) each process of a server
// saw a jump up to a second after another: PostgreSQL's backend processes
// disagreed about the time for that long, the fault was observed through
// one of them, and a case whose window was shorter than a second (P3's
// waiters taking over an expired lease row) missed it in about one trial
// in ten.
func (s *Server) useFaketime(env []string) ([]string, error) {
	// A restart keeps the offset: the clock moved, not the process.
	if _, err := os.Stat(s.faketimeFile()); os.IsNotExist(err) {
		if err := os.WriteFile(s.faketimeFile(), []byte("+0\n"), 0o644); err != nil {
			return nil, err
		}
	}
	if env == nil {
		env = os.Environ()
	}
	return append(env, "LD_PRELOAD="+Libfaketime, "FAKETIME_TIMESTAMP_FILE="+s.faketimeFile(),
		"FAKETIME_NO_CACHE=1", "DONT_FAKE_MONOTONIC=1"), nil
}

// JumpClock moves a server's wall clock by d more (back when d < 0) (it must have
// been started with its clock under libfaketime): its processes see the
// jump at their next clock read.
func (c *Cluster) JumpClock(name string, d time.Duration) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("clock jump: no server %q", name)
	}
	if !c.faketime[name] {
		return fmt.Errorf("clock jump: %s was not started with its clock under libfaketime", name)
	}
	b, err := os.ReadFile(s.faketimeFile())
	if err != nil {
		return err
	}
	var cur float64
	fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(string(b)), "+"), "%g", &cur)
	// libfaketime reads a signed offset: "+5s" ahead, "-5s" back.
	return os.WriteFile(s.faketimeFile(), []byte(fmt.Sprintf("%+gs\n", cur+d.Seconds())), 0o644)
}
