package cluster

import (
	"fmt"
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
