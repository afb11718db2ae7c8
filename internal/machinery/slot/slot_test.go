package slot

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSlotsAreExclusive: two holders never get the same address range, and
// a slot comes back when its holder releases it.
func TestSlotsAreExclusive(t *testing.T) {
	a, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if a.N == b.N || a.Server(1) == b.Server(1) || a.Instance(1) == b.Instance(1) {
		t.Fatalf("two slots share addresses: %d %d", a.N, b.N)
	}
	if !a.Contains(a.Server(3)) || a.Contains(b.Server(3)) || !strings.HasPrefix(a.Instance(2), "127.") {
		t.Errorf("addresses: %s %s %s", a.Server(3), b.Server(3), a.Instance(2))
	}
	n := a.N
	a.Release()
	a.Release()
	c, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	defer b.Release()
	if c.N != n {
		t.Errorf("released slot %d not reused (got %d)", n, c.N)
	}
}

// TestSlotOfAKilledRunIsFree: the kernel drops a flock when its holder dies,
// so a run killed with SIGKILL cannot keep its addresses.
func TestSlotOfAKilledRunIsFree(t *testing.T) {
	if os.Getenv("LOCKBENCH_SLOT_CHILD") == "1" {
		s, err := Acquire()
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(s.Prefix() + "\n")
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlotOfAKilledRunIsFree$")
	cmd.Env = append(os.Environ(), "LOCKBENCH_SLOT_CHILD=1")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	nr, _ := out.Read(buf)
	held := strings.TrimSpace(string(buf[:nr]))
	cmd.Process.Kill()
	cmd.Wait()
	var got []*Slot
	defer func() {
		for _, s := range got {
			s.Release()
		}
	}()
	for i := 0; i < Slots; i++ {
		s, err := Acquire()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
		if s.Prefix() == held {
			return
		}
	}
	t.Fatalf("the killed holder's slot %s never came back", held)
}

// TestSlotsCannotBeHeldHostage replays the attack of issue 41: another
// user locks every slot file it can open, in the old shared directory and
// in root's; a root run still gets a slot, and the stranger could open
// none of root's files.
func TestSlotsCannotBeHeldHostage(t *testing.T) {
	if os.Getenv("LOCKBENCH_SLOT_HOSTAGE") != "" {
		held, denied := 0, 0
		for _, d := range strings.Split(os.Getenv("LOCKBENCH_SLOT_HOSTAGE"), ":") {
			for n := 0; n < Slots; n++ {
				p := filepath.Join(d, fmt.Sprintf("slot-%d.lock", n))
				f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o666)
				if err != nil {
					f, err = os.Open(p)
				}
				if err != nil {
					denied++
					continue
				}
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
					held++
				}
			}
		}
		fmt.Printf("held %d denied %d\n", held, denied)
		select {}
	}
	if os.Geteuid() != 0 {
		t.Skip("the attack needs root (a run of root's) and another user")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	oldRoot, oldLegacy := rootDir, legacyDir
	rootDir, legacyDir = filepath.Join(base, "run/lockbench/slots"), filepath.Join(base, "legacy")
	t.Cleanup(func() { rootDir, legacyDir = oldRoot, oldLegacy })
	os.MkdirAll(filepath.Join(base, "run"), 0o755)
	os.Mkdir(legacyDir, 0o777)
	os.Chmod(legacyDir, 0o777)
	// Root's directory and files exist before the attack, as after any run.
	s, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	for n := 0; n < Slots; n++ {
		os.OpenFile(filepath.Join(rootDir, fmt.Sprintf("slot-%d.lock", n)), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	}
	// The test binary, where user nobody can run it.
	exe, _ := os.Executable()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "slot.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestSlotsCannotBeHeldHostage$")
	cmd.Env = []string{"LOCKBENCH_SLOT_HOSTAGE=" + legacyDir + ":" + rootDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the attacker said nothing: %v", err)
	}
	var held, denied int
	fmt.Sscanf(line, "held %d denied %d", &held, &denied)
	if held != Slots || denied != Slots {
		t.Fatalf("the attacker %q: want every legacy file held and every one of root's denied", line)
	}
	got, err := Acquire()
	if err != nil {
		t.Fatalf("a root run was held hostage: %v", err)
	}
	got.Release()
}

// TestOlderBinariesSeeTheSlotTaken: a run also holds its slot's lock in the
// old shared directory, so an older lockbench on the machine does not take
// the same slot (and remove this run's namespaces as a dead run's).
func TestOlderBinariesSeeTheSlotTaken(t *testing.T) {
	base := t.TempDir()
	oldRoot, oldLegacy := rootDir, legacyDir
	rootDir, legacyDir = filepath.Join(base, "run/lockbench/slots"), filepath.Join(base, "legacy")
	t.Cleanup(func() { rootDir, legacyDir = oldRoot, oldLegacy })
	os.MkdirAll(filepath.Join(base, "run"), 0o755)
	os.Mkdir(legacyDir, 0o755)
	for n := 0; n < Slots; n++ {
		os.WriteFile(filepath.Join(legacyDir, fmt.Sprintf("slot-%d.lock", n)), nil, 0o644)
	}
	s, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(legacyDir, fmt.Sprintf("slot-%d.lock", s.N)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Error("an older binary could take the slot this run holds")
	}
	s.Release()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the legacy lock outlived the release: %v", err)
	}
}

// TestSlotStillBoundIsSkipped: a slot whose flock is free while a socket is
// still bound to its addresses (a dead run's server exiting) is skipped.
func TestSlotStillBoundIsSkipped(t *testing.T) {
	a, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	n := a.N
	l, err := net.Listen("tcp", a.Server(1)+":0")
	a.Release()
	if err != nil {
		t.Fatal(err)
	}
	if !inUse(n) {
		t.Fatalf("slot %d with a listener on %s is not seen in use", n, l.Addr())
	}
	b, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if b.N == n {
		t.Errorf("slot %d handed out while %s listens on it", n, l.Addr())
	}
	b.Release()
	l.Close()
	if inUse(n) {
		t.Errorf("slot %d still seen in use once its listener closed", n)
	}
}
