package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/childenv"
	"github.com/lockbench/lockbench/internal/machinery/faketime"
)

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
		env = childenv.Env()
	}
	return append(env, faketime.Env(s.faketimeFile())...), nil
}

func (c *Cluster) fakeClockOf(op, name string) (*Server, faketime.Clock, error) {
	s := c.Server(name)
	if s == nil {
		return nil, faketime.Clock{}, fmt.Errorf("%s: no server %q", op, name)
	}
	if !c.faketime[name] {
		return nil, faketime.Clock{}, fmt.Errorf("%s: %s was not started with its clock under libfaketime", op, name)
	}
	b, err := os.ReadFile(s.faketimeFile())
	if err != nil {
		return nil, faketime.Clock{}, err
	}
	fc, err := faketime.Parse(strings.TrimSpace(string(b)))
	return s, fc, err
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
	fc.Offset += d.Seconds()
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
	elapsed, err := faketime.ProcessAge(s.Process().Pid())
	if err != nil {
		return fmt.Errorf("clock drift on %s: %w", name, err)
	}
	return os.WriteFile(s.faketimeFile(), []byte(fc.WithRate(rate, elapsed).String()+"\n"), 0o644)
}
