package remote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/machinery/remote"
	"github.com/lockbench/lockbench/internal/machinery/remote/remotetest"
)

// TestRemoteProcess drives a process through a real sshd: found by its
// pid file, stopped (and seen stopped, and still alive), resumed, killed
// (and seen gone), started again; a host key not in known_hosts is
// refused.
func TestRemoteProcess(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "p.pid")
	start := fmt.Sprintf("setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $! > %s", pidFile)
	ctl := remotetest.SSHD(t, pidFile, start)
	h, err := remote.DialSSH(ctl.SSH)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := remote.RunT(h, start); err != nil {
		t.Fatal(err)
	}
	r, err := remote.Locate(h, ctl, "sleeper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-r.Group(), syscall.SIGKILL) })
	p := procgroup.NewRemote("sleeper", r)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The kernel marks a process stopped once it has taken the signal,
	// which a busy machine may schedule late: wait for it, as the pause
	// fault does, rather than read the state at once.
	if st, err := stoppedWithin(p, true, 5*time.Second); err != nil || !st {
		t.Errorf("after SIGSTOP: stopped %v, %v (not seen stopped within 5 s)", st, err)
	}
	if _, err := os.Stat(r.Note()); err != nil {
		t.Errorf("no note of the stop on the host: %v", err)
	}
	// The watcher's question, asked here (three times, as the watcher
	// would over its polls, which a sleep would leave to the machine's
	// speed): a stopped process has not exited.
	for i := 0; i < 3; i++ {
		if r.Exited() {
			t.Fatal("a stopped process was taken for an exited one")
		}
	}
	if !p.Alive() {
		t.Fatal("a stopped process was taken for an exited one")
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if st, err := stoppedWithin(p, false, 5*time.Second); err != nil || st {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.Pid()))
		t.Errorf("after SIGCONT: stopped %v, %v (here: %q)", st, err, b)
	}
	if _, err := os.Stat(r.Note()); err == nil {
		t.Error("the note of the stop outlived the resume")
	}
	if err := p.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !r.Exited() {
		t.Error("a killed process was not seen exited")
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute): // two polls over SSH: a hang's bound
		t.Error("the watcher did not see the process go in a minute")
	}
	bad := ctl.SSH
	bad.KnownHosts = filepath.Join(t.TempDir(), "empty")
	os.WriteFile(bad.KnownHosts, nil, 0o644)
	if _, err := remote.DialSSH(bad); err == nil {
		t.Error("a host whose key is not in known_hosts was accepted")
	}
}

// stoppedWithin polls p's stopped state until it is want or d has passed,
// and returns the last answer.
func stoppedWithin(p *procgroup.Process, want bool, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		st, err := p.Stopped()
		if (err == nil && st == want) || time.Now().After(deadline) {
			return st, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
