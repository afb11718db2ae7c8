package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
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

// fakeClock is what a server's faketime file says: an offset in seconds
// and a rate (1: the clock runs at the real pace).
type fakeClock struct {
	offset, rate float64
}

// parseFakeClock reads "+5s", "-1.5s" or "+0.2s x1.5" (libfaketime's
// relative offset, with its speed factor).
func parseFakeClock(s string) (fakeClock, error) {
	fc := fakeClock{rate: 1}
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return fc, fmt.Errorf("faketime file %q: want an offset and at most a rate", s)
	}
	off, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(f[0], "+"), "s"), 64)
	if err != nil {
		return fc, fmt.Errorf("faketime file %q: offset: %v", s, err)
	}
	fc.offset = off
	if len(f) == 2 {
		r, err := strconv.ParseFloat(strings.TrimPrefix(f[1], "x"), 64)
		if err != nil || r <= 0 || !strings.HasPrefix(f[1], "x") {
			return fc, fmt.Errorf("faketime file %q: rate %q", s, f[1])
		}
		fc.rate = r
	}
	return fc, nil
}

// String writes the file's line back: "+5s x1", "-0.25s x1.5". The rate
// is always written: libfaketime keeps the last rate it read when a line
// has none, so a drift set back to the real pace without "x1" would go on.
func (fc fakeClock) String() string {
	return fmt.Sprintf("%+gs x%g", fc.offset, fc.rate)
}

// withRate is fc running at rate from now on without a step: libfaketime
// scales the time since its process started (elapsed seconds ago), so
// the fake time start + elapsed·rate + offset stays where it is when the
// offset takes up the difference of rates over elapsed.
func (fc fakeClock) withRate(rate, elapsed float64) fakeClock {
	return fakeClock{offset: fc.offset + elapsed*(fc.rate-rate), rate: rate}
}

func (c *Cluster) fakeClockOf(op, name string) (*Server, fakeClock, error) {
	s := c.Server(name)
	if s == nil {
		return nil, fakeClock{}, fmt.Errorf("%s: no server %q", op, name)
	}
	if !c.faketime[name] {
		return nil, fakeClock{}, fmt.Errorf("%s: %s was not started with its clock under libfaketime", op, name)
	}
	b, err := os.ReadFile(s.faketimeFile())
	if err != nil {
		return nil, fakeClock{}, err
	}
	fc, err := parseFakeClock(strings.TrimSpace(string(b)))
	return s, fc, err
}

// clockJumper is a placement that moves a server's clock itself (over
// SSH, through the faketime file on its host; in Kubernetes, with Chaos
// Mesh's TimeChaos); clockDrifter one that sets its pace.
type clockJumper interface {
	jumpClock(name string, d time.Duration) error
}

type clockDrifter interface {
	driftClock(name string, rate float64) error
}

// JumpClock moves a server's wall clock by d more (back when d < 0) (it must have
// been started with its clock under libfaketime): its processes see the
// jump at their next clock read. A drift in force goes on.
func (c *Cluster) JumpClock(name string, d time.Duration) error {
	if j, ok := c.place.(clockJumper); ok {
		return j.jumpClock(name, d)
	}
	s, fc, err := c.fakeClockOf("clock jump", name)
	if err != nil {
		return err
	}
	fc.offset += d.Seconds()
	return os.WriteFile(s.faketimeFile(), []byte(fc.String()+"\n"), 0o644)
}

// DriftClock makes a server's wall clock run at rate times the real pace
// from now on (1: the real pace again, keeping what it drifted), with no
// step. libfaketime applies its rate to the time since the process
// started, which is read from the kernel (the process's start in clock
// ticks since boot, against CLOCK_BOOTTIME now): a server restarted while
// its clock drifts starts with a step of the drift its old process had
// not accumulated yet, which DriftClock does not correct.
func (c *Cluster) DriftClock(name string, rate float64) error {
	if rate <= 0 {
		return fmt.Errorf("clock drift: rate %g must be positive", rate)
	}
	if d, ok := c.place.(clockDrifter); ok {
		return d.driftClock(name, rate)
	}
	s, fc, err := c.fakeClockOf("clock drift", name)
	if err != nil {
		return err
	}
	elapsed, err := processAge(s.Process().Pid())
	if err != nil {
		return fmt.Errorf("clock drift on %s: %w", name, err)
	}
	return os.WriteFile(s.faketimeFile(), []byte(fc.withRate(rate, elapsed).String()+"\n"), 0o644)
}

// clockTicks is the kernel's USER_HZ, the unit of a process's start time
// in /proc/<pid>/stat (100 on Linux for every architecture lockbench runs
// on).
const clockTicks = 100

// processAge is how many seconds ago process pid started.
func processAge(pid int) (float64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, err
	}
	now := float64(ts.Sec) + float64(ts.Nsec)/1e9
	return now - float64(st.Starttime)/clockTicks, nil
}
