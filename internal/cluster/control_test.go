package cluster

import (
	"context"
	"fmt"
	"github.com/lockbench/lockbench/backends"
	"golang.org/x/sys/unix"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sshdOnLoopback starts a real sshd on a loopback port for root with a
// fresh host key and client key, and returns a Control for a server whose
// pid file is pidFile.
func sshdOnLoopback(t *testing.T, pidFile, start string) *Control {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sshd needs root")
	}
	if _, err := exec.LookPath("/usr/sbin/sshd"); err != nil {
		t.Fatalf("openssh-server is not installed (make setup): %v", err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for _, k := range []string{"host", "client"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	pub, _ := os.ReadFile(filepath.Join(dir, "client.pub"))
	os.WriteFile(filepath.Join(dir, "ak"), pub, 0o600)
	hostPub, _ := os.ReadFile(filepath.Join(dir, "host.pub"))
	os.WriteFile(filepath.Join(dir, "kh"), []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub)), 0o644)
	cfg := filepath.Join(dir, "cfg")
	os.WriteFile(cfg, []byte(fmt.Sprintf("ListenAddress 127.0.0.1:%d\nHostKey %s\nAuthorizedKeysFile %s\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\nPidFile %s\n",
		port, filepath.Join(dir, "host"), filepath.Join(dir, "ak"), filepath.Join(dir, "sshd.pid"))), 0o644)
	os.MkdirAll("/run/sshd", 0o755)
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Setenv("LB_TEST_SSH_KEY", filepath.Join(dir, "client"))
	return &Control{SSH: SSH{Host: "127.0.0.1", Port: port, User: "root", KeyEnv: "LB_TEST_SSH_KEY", KnownHosts: filepath.Join(dir, "kh")},
		PidFile: pidFile, Start: start}
}

// TestRemoteProcess drives a process through a real sshd: found by its
// pid file, stopped (and seen stopped, and still alive), resumed, killed
// (and seen gone), started again; a host key not in known_hosts is
// refused.
func TestRemoteProcess(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "p.pid")
	start := fmt.Sprintf("setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $! > %s", pidFile)
	ctl := sshdOnLoopback(t, pidFile, start)
	h, err := newSSHHost(ctl.SSH)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if _, err := runT(h, start); err != nil {
		t.Fatal(err)
	}
	r, err := locate(h, ctl, "sleeper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-r.pgid, syscall.SIGKILL) })
	p := newRemoteProcess("sleeper", r)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Stopped(); err != nil || !st {
		t.Errorf("after SIGSTOP: stopped %v, %v", st, err)
	}
	if _, err := os.Stat(r.stateFile); err != nil {
		t.Errorf("no note of the stop on the host: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // a few polls of the watcher
	if !p.Alive() {
		t.Fatal("a stopped process was taken for an exited one")
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Stopped(); err != nil || st {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.main))
		t.Errorf("after SIGCONT: stopped %v, %v (here: %q)", st, err, b)
	}
	if _, err := os.Stat(r.stateFile); err == nil {
		t.Error("the note of the stop outlived the resume")
	}
	if err := p.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(2 * time.Second):
		t.Error("the watcher did not see the process go")
	}
	bad := ctl.SSH
	bad.KnownHosts = filepath.Join(t.TempDir(), "empty")
	os.WriteFile(bad.KnownHosts, nil, 0o644)
	if _, err := newSSHHost(bad); err == nil {
		t.Error("a host whose key is not in known_hosts was accepted")
	}
}

// TestRemoteClock: a server started under libfaketime on a host (a perl
// loop writing its wall clock, and the unfaked monotonic clock it read it
// at, to a file; found by its pid file) has its clock stepped and its
// pace changed through the control plane's faketime_file, over a real
// sshd: what the process reads moves by the jump, then runs at the rate
// asked, then at the real pace again. Each reading is judged at the
// monotonic instant it was made, so a loaded machine that runs the loop
// late makes it no less right.
func TestRemoteClock(t *testing.T) {
	if err := FaketimeAvailable(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	pidFile, clockFile, out := filepath.Join(dir, "p.pid"), filepath.Join(dir, "faketime.rc"), filepath.Join(dir, "now")
	start := fmt.Sprintf("echo +0 > %[1]s; LD_PRELOAD=%[2]s FAKETIME_TIMESTAMP_FILE=%[1]s FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 setsid perl -MTime::HiRes=time,clock_gettime,CLOCK_MONOTONIC -e '$|=1; while (1) { my $m = clock_gettime(CLOCK_MONOTONIC); my $w = time; open(F, \">%[3]s.tmp\"); print F \"$w $m\"; close F; rename(\"%[3]s.tmp\", \"%[3]s\"); select(undef, undef, undef, 0.02) }' > /dev/null 2>&1 < /dev/null & echo $! > %[4]s",
		clockFile, Libfaketime, out, pidFile)
	ctl := sshdOnLoopback(t, pidFile, start)
	ctl.FaketimeFile = clockFile
	o := newOnSSH(external{}, map[string]*Control{"pg-1": ctl})
	o.log = t.Logf
	defer o.close()
	s := &Server{Spec: backends.ServerSpec{Name: "pg-1", Kind: "postgres"}, IP: "127.0.0.1"}
	h, err := newSSHHost(ctl.SSH)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runT(h, start); err != nil {
		t.Fatal(err)
	}
	h.close()
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
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			b, err := os.ReadFile(out)
			var w, m float64
			if _, err2 := fmt.Sscanf(string(b), "%g %g", &w, &m); err == nil && err2 == nil && m > after {
				return w - (m + base), m
			}
		}
		t.Fatal("the process wrote no clock reading for 10s")
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

func (h *recordingHost) run(_ context.Context, cmd string) (string, error) {
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
	o := newOnSSH(external{fw: NewFirewall()}, nil)
	o.byIP["10.9.0.1"] = "h1:22"
	o.fws["h1:22"] = &remoteFirewall{h: h, chain: "LOCKBENCH-1"}
	ctl, free := Endpoint{IP: "10.9.0.1"}, Endpoint{IP: "10.9.0.2"}
	for _, c := range [][2]Endpoint{{ctl, free}, {free, ctl}} {
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
		cut, err := o.drop(Endpoint{IP: "127.9.1.1", Mark: 0x4c000101}, ctl, 1)
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
