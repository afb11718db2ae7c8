package powerfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestFailedRevertIsAnError: a power loss whose undo cannot be applied (a
// truncate or a rewrite of the backing file fails) is an error, never a
// loss reported as applied. (A shadowed err used to swallow both.)
func TestFailedRevertIsAnError(t *testing.T) {
	for name, u := range map[string]undo{
		"truncate fails": {off: 0, size: -1, n: 5},
		"rewrite fails":  {off: -1, size: 0, n: 5, old: []byte("x")},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(p)
			ino := st.Sys().(*syscall.Stat_t).Ino
			loss, err := revert(dir, map[uint64][]undo{ino: {u}})
			if err == nil {
				t.Fatalf("a revert that failed was reported as applied: %+v", loss)
			}
			if loss.Bytes != 0 || loss.Files != 0 {
				t.Errorf("a failed revert counted a loss: %+v", loss)
			}
		})
	}
}

// TestDevFuseIsCloseOnExec: a child started while a layer is mounted
// (a server) does not hold the FUSE connection: a harness killed by
// SIGKILL takes the connection with it, and no server waits on it in
// uninterruptible sleep.
func TestDevFuseIsCloseOnExec(t *testing.T) {
	f := mountTemp(t)
	fds, err := DevFuseFds(os.Getpid())
	if err != nil || len(fds) == 0 {
		t.Fatalf("no /dev/fuse descriptor in the harness while mounted: %v %v", fds, err)
	}
	out, err := exec.Command("sh", "-c", "ls -l /proc/$$/fd/").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "/dev/fuse") {
		t.Errorf("a child inherited /dev/fuse:\n%s", out)
	}
	if _, err := os.ReadDir(f.Mountpoint); err != nil {
		t.Errorf("the layer does not answer: %v", err)
	}
}

// TestMountingsHaveTheirConnection: the layers Sweep would repair are
// known with their FUSE connection, which fusectl lists.
func TestMountingsHaveTheirConnection(t *testing.T) {
	f := mountTemp(t)
	ms, err := mountsUnder(f.Mountpoint)
	if err != nil || len(ms) != 1 {
		t.Fatalf("mounts under %s: %v %v", f.Mountpoint, ms, err)
	}
	if err := fusectl(); err != nil {
		t.Skipf("no fusectl: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(f.Mountpoint, &st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(connDir, strconv.Itoa(ms[0].Conn))); err != nil || uint64(ms[0].Conn) != st.Dev {
		t.Errorf("connection %d of %s (device %d): %v", ms[0].Conn, f.Mountpoint, st.Dev, err)
	}
}

// TestAbortConnCutsTheLayer: aborting a layer's connection (what the next
// run does to a dead run's) makes every request on it fail at once.
func TestAbortConnCutsTheLayer(t *testing.T) {
	f := mountTemp(t)
	ms, err := mountsUnder(f.Mountpoint)
	if err != nil || len(ms) != 1 {
		t.Fatalf("mounts under %s: %v %v", f.Mountpoint, ms, err)
	}
	if err := abortConn(ms[0].Conn); err != nil {
		t.Fatalf("abort connection %d: %v", ms[0].Conn, err)
	}
	if _, err := os.ReadDir(f.Mountpoint); err == nil {
		t.Error("the layer still answers after its connection was aborted")
	}
}
