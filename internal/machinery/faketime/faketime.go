// Package faketime moves the wall clock of one process with libfaketime:
// the line its file says (an offset and a pace, Clock), the environment
// a process is started with to read it (Env), and how old a process is
// (a change of pace applies to the time since it started). A process's
// clock moves when its faketime file is written: here by the cluster,
// on another host by its control plane.
package faketime

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Lib is Debian's libfaketime, which moves the wall clock of the
// processes it is preloaded into (and of nothing else on the machine).
const Lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// Available says whether a server's wall clock can be moved. A
// time namespace cannot do it (it offsets CLOCK_MONOTONIC and
// CLOCK_BOOTTIME only), and moving the machine's own clock would move every
// process's; libfaketime moves the clock of one dynamically linked program
// that reads it through libc. That rules out Go servers (etcd, Consul read
// the clock through the vDSO) and redis-server 7.0 (it aborts under
// libfaketime): their clock jumps are emulated where they can be.
func Available() error {
	if _, err := os.Stat(Lib); err != nil {
		return fmt.Errorf("libfaketime is not installed (apt-get install -y libfaketime, or make setup as root): %w", err)
	}
	return nil
}

// Env is the environment that makes a process read its wall clock
// through libfaketime, offset by what file says, re-read at every clock
// read; monotonic clocks are left alone.
func Env(file string) []string {
	return []string{"LD_PRELOAD=" + Lib, "FAKETIME_TIMESTAMP_FILE=" + file, "FAKETIME_NO_CACHE=1", "DONT_FAKE_MONOTONIC=1"}
}

// Clock is what a faketime file says: an offset in seconds and a rate
// (1: the clock runs at the real pace).
type Clock struct {
	Offset, Rate float64
}

// Parse reads "+5s", "-1.5s" or "+0.2s x1.5" (libfaketime's
// relative offset, with its speed factor).
func Parse(s string) (Clock, error) {
	fc := Clock{Rate: 1}
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return fc, fmt.Errorf("faketime file %q: want an offset and at most a rate", s)
	}
	off, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(f[0], "+"), "s"), 64)
	if err != nil {
		return fc, fmt.Errorf("faketime file %q: offset: %v", s, err)
	}
	fc.Offset = off
	if len(f) == 2 {
		r, err := strconv.ParseFloat(strings.TrimPrefix(f[1], "x"), 64)
		if err != nil || r <= 0 || !strings.HasPrefix(f[1], "x") {
			return fc, fmt.Errorf("faketime file %q: rate %q", s, f[1])
		}
		fc.Rate = r
	}
	return fc, nil
}

// String writes the file's line back: "+5s x1", "-0.25s x1.5". The rate
// is always written: libfaketime keeps the last rate it read when a line
// has none, so a drift set back to the real pace without "x1" would go on.
func (fc Clock) String() string {
	return fmt.Sprintf("%+gs x%g", fc.Offset, fc.Rate)
}

// WithRate is fc running at rate from now on without a step: libfaketime
// scales the time since its process started (elapsed seconds ago), so
// the fake time start + elapsed·rate + offset stays where it is when the
// offset takes up the difference of rates over elapsed.
func (fc Clock) WithRate(rate, elapsed float64) Clock {
	return Clock{Offset: fc.Offset + elapsed*(fc.Rate-rate), Rate: rate}
}

// ClockTicks is the kernel's USER_HZ, the unit of a process's start time
// in /proc/<pid>/stat (100 on Linux for every architecture lockbench runs
// on).
const ClockTicks = 100

// ProcessAge is how many seconds ago process pid started.
func ProcessAge(pid int) (float64, error) {
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
	return now - float64(st.Starttime)/ClockTicks, nil
}
