// Package remotetest holds what tests of the control planes share: a real
// sshd on a loopback port, the host a control.Section reaches.
package remotetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/control"
)

// SSHD starts a real sshd on a loopback port for root with a
// fresh host key and client key, and returns a control.Section for a server whose
// pid file is pidFile.
func SSHD(t testing.TB, pidFile, start string) *control.Section {
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
	return &control.Section{SSH: control.SSH{Host: "127.0.0.1", Port: port, User: "root", KeyEnv: "LB_TEST_SSH_KEY", KnownHosts: filepath.Join(dir, "kh")},
		PidFile: pidFile, Start: start}
}
