package slot

import (
	"net"
	"os"
	"os/exec"
	"strings"
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

// TestHoldOnlyAFreeSlot: Hold takes a slot nobody holds, and never one a
// run holds (a repair must not clean a live run's namespaces).
func TestHoldOnlyAFreeSlot(t *testing.T) {
	a, err := Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := Hold(a.N); ok {
		s.Release()
		t.Fatalf("held slot %d, which a run holds", a.N)
	}
	n := a.N
	a.Release()
	s, ok := Hold(n)
	if !ok {
		t.Fatalf("could not hold slot %d once released", n)
	}
	if b, err := Acquire(); err == nil && b.N == n {
		t.Errorf("slot %d acquired while held for a repair", n)
	} else if err == nil {
		b.Release()
	}
	s.Release()
	if _, ok := Hold(Slots); ok {
		t.Error("held a slot beyond the last")
	}
}

// TestSlotStillBoundIsSkipped: a free slot whose addresses a process
// still listens on (a dead run's server still exiting) is not handed out:
// its run could not bind them.
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
