package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/machinery/faketime"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/remote"
	"github.com/lockbench/lockbench/internal/machinery/remote/remotetest"
	"golang.org/x/sys/unix"
)

// TestRemoteClock: a server started under libfaketime on a host (a perl
// loop writing its wall clock, and the unfaked monotonic clock it read it
// at, to a file; found by its pid file) has its clock stepped and its
// pace changed through the control plane's faketime_file, over a real
// sshd: what the process reads moves by the jump, then runs at the rate
// asked, then at the real pace again. Each reading is judged at the
// monotonic instant it was made, so a loaded machine that runs the loop
// late makes it no less right.
func TestRemoteClock(t *testing.T) {
	if err := faketime.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	pidFile, clockFile, out := filepath.Join(dir, "p.pid"), filepath.Join(dir, "faketime.rc"), filepath.Join(dir, "now")
	start := fmt.Sprintf("echo +0 > %[1]s; LD_PRELOAD=%[2]s FAKETIME_TIMESTAMP_FILE=%[1]s FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 setsid perl -MTime::HiRes=time,clock_gettime,CLOCK_MONOTONIC -e '$|=1; while (1) { my $m = clock_gettime(CLOCK_MONOTONIC); my $w = time; open(F, \">%[3]s.tmp\"); print F \"$w $m\"; close F; rename(\"%[3]s.tmp\", \"%[3]s\"); select(undef, undef, undef, 0.02) }' > /dev/null 2>&1 < /dev/null & echo $! > %[4]s",
		clockFile, faketime.Lib, out, pidFile)
	ctl := remotetest.SSHD(t, pidFile, start)
	ctl.FaketimeFile = clockFile
	o := newOnSSH(external{}, map[string]*control.Section{"pg-1": ctl})
	o.log = t.Logf
	defer o.close()
	s := &Server{Spec: backends.ServerSpec{Name: "pg-1", Kind: "postgres"}, IP: "127.0.0.1"}
	h, err := remote.DialSSH(ctl.SSH)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.RunT(h, start); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := o.attach(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-s.Process().Pid(), syscall.SIGKILL); s.Process().Detach() })
	mono := func() float64 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return float64(ts.Sec) + float64(ts.Nsec)/1e9
	}
	// wall - mono on this machine: the real wall clock at a monotonic
	// instant.
	base := float64(time.Now().UnixNano())/1e9 - mono()
	// read is the process's clock minus the real one, from a reading it
	// made after the call, and the monotonic instant of that reading.
	read := func() (float64, float64) {
		t.Helper()
		after := mono()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			b, err := os.ReadFile(out)
			var w, m float64
			if _, err2 := fmt.Sscanf(string(b), "%g %g", &w, &m); err == nil && err2 == nil && m > after {
				return w - (m + base), m
			}
		}
		t.Fatal("the process wrote no clock reading for a minute")
		return 0, 0
	}
	if skew, _ := read(); skew < -0.2 || skew > 0.2 {
		t.Fatalf("before any fault the process's clock is %.2fs off", skew)
	}
	if err := o.jumpClock("pg-1", 100*time.Second); err != nil {
		t.Fatal(err)
	}
	if skew, _ := read(); skew < 99.8 || skew > 100.2 {
		t.Errorf("after a jump of 100s the process's clock is %.2fs off", skew)
	}
	if err := o.driftClock("pg-1", 3); err != nil {
		t.Fatal(err)
	}
	s1, m1 := read()
	time.Sleep(time.Second)
	s2, m2 := read()
	if rate := 1 + (s2-s1)/(m2-m1); rate < 2.8 || rate > 3.2 || s1 < 99.5 {
		t.Errorf("at rate 3 the clock ran at x%.2f (and %.2fs off just after the switch: no step wanted)", rate, s1)
	}
	if err := o.driftClock("pg-1", 1); err != nil {
		t.Fatal(err)
	}
	s1, m1 = read()
	time.Sleep(500 * time.Millisecond)
	s2, m2 = read()
	if rate := 1 + (s2-s1)/(m2-m1); rate < 0.95 || rate > 1.05 {
		t.Errorf("back at rate 1 the clock runs at x%.2f", rate)
	}
}

// recordingHost is a host that answers every command with success and
// records it.
type recordingHost struct{ cmds []string }

func (h *recordingHost) Run(_ context.Context, cmd string) (string, error) {
	h.cmds = append(h.cmds, cmd)
	return "", nil
}
func (h *recordingHost) String() string { return "recorder" }

// TestSSHCutsWhereTheyCan: a cut between a controlled server and one with
// no control plane is made on the controlled one's host whichever way the
// packets go: as they leave it (OUTPUT), and as they arrive from the
// other (INPUT, which the chain is jumped to from as well, but for lo);
// a cut from or to a marked worker instance is made on this machine.
func TestSSHCutsWhereTheyCan(t *testing.T) {
	h := &recordingHost{}
	o := newOnSSH(external{found{fw: firewall.New()}}, nil)
	o.byIP["10.9.0.1"] = "h1:22"
	o.fws["h1:22"] = remote.NewChain(h, "LOCKBENCH-1")
	ctl, free := firewall.Endpoint{IP: "10.9.0.1"}, firewall.Endpoint{IP: "10.9.0.2"}
	for _, c := range [][2]firewall.Endpoint{{ctl, free}, {free, ctl}} {
		if _, err := o.drop(c[0], c[1], 1); err != nil {
			t.Fatal(err)
		}
	}
	all := strings.Join(h.cmds, "\n")
	for _, want := range []string{"-I OUTPUT -j LOCKBENCH-1", "-I INPUT ! -i lo -j LOCKBENCH-1",
		"-A LOCKBENCH-1 -s 10.9.0.1 -d 10.9.0.2", "-A LOCKBENCH-1 -s 10.9.0.2 -d 10.9.0.1"} {
		if !strings.Contains(all, want) {
			t.Errorf("the controlled host got no %q:\n%s", want, all)
		}
	}
	n := len(h.cmds)
	if os.Geteuid() == 0 {
		cut, err := o.drop(firewall.Endpoint{IP: "127.9.1.1", Mark: 0x4c000101}, ctl, 1)
		if err != nil {
			t.Fatal(err)
		}
		cut.Undo()
		o.fw.Close()
	}
	if len(h.cmds) != n {
		t.Errorf("a cut from a marked instance went to the server's host: %s", h.cmds[n:])
	}
}
