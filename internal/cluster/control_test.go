package cluster

import (
	"fmt"
	"github.com/lockbench/lockbench/backends"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
// loop writing its wall clock to a file, found by its pid file) has its
// clock stepped and its pace changed through the control plane's
// faketime_file, over a real sshd: what the process reads moves by the
// jump at once, and then runs at the rate asked.
func TestRemoteClock(t *testing.T) {
	if err := FaketimeAvailable(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	pidFile, clockFile, out := filepath.Join(dir, "p.pid"), filepath.Join(dir, "faketime.rc"), filepath.Join(dir, "now")
	start := fmt.Sprintf("echo +0 > %[1]s; LD_PRELOAD=%[2]s FAKETIME_TIMESTAMP_FILE=%[1]s FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 setsid perl -MTime::HiRes=time -e '$|=1; while (1) { open(F, \">%[3]s.tmp\"); print F time; close F; rename(\"%[3]s.tmp\", \"%[3]s\"); select(undef, undef, undef, 0.02) }' > /dev/null 2>&1 < /dev/null & echo $! > %[4]s",
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
	// read is the process's clock minus the real one, in seconds, from a
	// reading made after the call.
	read := func() float64 {
		t.Helper()
		time.Sleep(100 * time.Millisecond)
		b, err := os.ReadFile(out)
		var v float64
		if _, err2 := fmt.Sscanf(string(b), "%g", &v); err != nil || err2 != nil {
			t.Fatalf("read the process's clock: %v %v (%q)", err, err2, b)
		}
		return v - float64(time.Now().UnixNano())/1e9
	}
	if skew := read(); skew < -0.5 || skew > 0.5 {
		t.Fatalf("before any fault the process's clock is %.2fs off", skew)
	}
	if err := o.jumpClock("pg-1", 100*time.Second); err != nil {
		t.Fatal(err)
	}
	if skew := read(); skew < 99 || skew > 101 {
		t.Errorf("after a jump of 100s the process's clock is %.2fs off", skew)
	}
	if err := o.driftClock("pg-1", 3); err != nil {
		t.Fatal(err)
	}
	before := read()
	time.Sleep(time.Second)
	if gained := read() - before; gained < 1.5 || gained > 2.5 {
		t.Errorf("at rate 3 the clock gained %.2fs over about a second, want about 2 (and no step at the switch: it was %.2fs off)", gained, before)
	}
	if err := o.driftClock("pg-1", 1); err != nil {
		t.Fatal(err)
	}
	before = read()
	time.Sleep(500 * time.Millisecond)
	if gained := read() - before; gained < -0.2 || gained > 0.2 {
		t.Errorf("back at rate 1 the clock still drifts: %.2fs over half a second", gained)
	}
}
