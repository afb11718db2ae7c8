package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStatValue(t *testing.T) {
	cpu := "nr_periods 40\nnr_throttled 12\nthrottled_time 345000\n"
	if n, err := StatValue(cpu, "nr_throttled", "cpu.stat"); err != nil || n != 12 {
		t.Errorf("nr_throttled = %d, %v", n, err)
	}
	// blkio files: a line per device and operation; the field summed.
	blkio := "8:0 Read 10\n8:0 Write 7\n8:16 Write 5\nTotal 22\n"
	if n, err := StatValue(blkio, "Write", "blkio.throttle.io_serviced"); err != nil || n != 12 {
		t.Errorf("Write = %d, %v", n, err)
	}
	if _, err := StatValue(cpu, "nr_bursts", "cpu.stat"); err == nil || !strings.Contains(err.Error(), "no nr_bursts in cpu.stat") {
		t.Errorf("a missing key: %v", err)
	}
}

func TestNamesAndDevices(t *testing.T) {
	a, b := Name(), Name()
	want := fmt.Sprintf("%s%d-", Prefix, os.Getpid())
	if !strings.HasPrefix(a, want) || a == b {
		t.Errorf("Name() = %s, %s: want distinct names starting %s", a, b, want)
	}
	// glibc's encoding, as unix.Mkdev writes it: a disk, an NVMe
	// partition, numbers past the old 8-bit limits.
	for _, mm := range [][2]uint32{{8, 1}, {259, 3}, {4095, 1048575}} {
		want := fmt.Sprintf("%d:%d", mm[0], mm[1])
		if got := MajorMinor(unix.Mkdev(mm[0], mm[1])); got != want {
			t.Errorf("MajorMinor(Mkdev(%s)) = %s", want, got)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(".", &st); err != nil {
		t.Fatal(err)
	}
	if got, err := DeviceOf("."); err != nil || got != MajorMinor(uint64(st.Dev)) {
		t.Errorf("DeviceOf(.) = %s, %v", got, err)
	}
}

// TestConfine puts a real process in a CPU cgroup and takes it out again
// (root and a cgroup v1 cpu controller only).
func TestConfine(t *testing.T) {
	if err := Available("cpu"); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c, err := Confine("cpu", []int{cmd.Process.Pid}, [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "10000"}})
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if strings.TrimSpace(string(procs)) != fmt.Sprint(cmd.Process.Pid) {
		t.Errorf("cgroup.procs = %q, want %d", procs, cmd.Process.Pid)
	}
	if _, err := c.Stat("cpu.stat", "nr_throttled"); err != nil {
		t.Error(err)
	}
	if err := c.Undo(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Undo: %v", c.dir, err)
	}
	if _, err := Confine("cpu", nil, nil); err == nil {
		t.Error("confining no process succeeded")
	}
}
