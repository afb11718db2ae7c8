// Package cgroup confines processes in cgroups (v1) of the harness's own,
// named lockbench-<pid>-<n> so that those of a killed harness can be
// recognised and removed: a CPU quota (controller cpu) or a disk throttle
// (blkio). It confines processes it is given; which processes make up a
// server or an instance is its caller's to say (package procgroup here,
// package remote on another host, which writes the same settings there).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Root is where the cgroup (v1) controllers are mounted.
const Root = "/sys/fs/cgroup"

// Prefix names the cgroups lockbench makes: lockbench-<pid>-<n>, so that
// those of a killed harness can be recognised and removed.
const Prefix = "lockbench-"

var cgroupSeq struct {
	sync.Mutex
	n int
}

// Confinement is a process group moved into a cgroup of the harness's own,
// under one controller (cpu: a CPU quota; blkio: a disk throttle), until
// Undo moves it back.
type Confinement struct {
	ctrl, dir string
	pids      []int
}

// Available says whether cgroup v1 controller ctrl can be used.
func Available(ctrl string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("confining a process (cgroup %s) needs root", ctrl)
	}
	if _, err := os.Stat(filepath.Join(Root, ctrl, "cgroup.procs")); err != nil {
		return fmt.Errorf("no cgroup v1 %s controller at %s: %w", ctrl, filepath.Join(Root, ctrl), err)
	}
	return nil
}

// Confine moves the processes pids (a process group's: one that exited
// meanwhile is skipped) into a new cgroup of controller ctrl with the
// given settings (file name to value, written in order: a quota after
// its period).
func Confine(ctrl string, pids []int, settings [][2]string) (*Confinement, error) {
	if err := Available(ctrl); err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, errors.New("no process to confine")
	}
	name := Name()
	c := &Confinement{ctrl: ctrl, dir: filepath.Join(Root, ctrl, name)}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup %s: %w", c.dir, err)
	}
	for _, kv := range settings {
		if err := os.WriteFile(filepath.Join(c.dir, kv[0]), []byte(kv[1]), 0o644); err != nil {
			return nil, errors.Join(fmt.Errorf("set %s=%s: %w", kv[0], kv[1], err), c.Undo())
		}
	}
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, errors.Join(fmt.Errorf("move %d into %s: %w", pid, c.dir, err), c.Undo())
		}
		c.pids = append(c.pids, pid)
	}
	return c, nil
}

// Stat returns the value of a line of one of the cgroup's files ("cpu.stat"
// "nr_throttled"; for blkio files, the sum over devices of a field).
func (c *Confinement) Stat(file, key string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	return StatValue(string(b), key, filepath.Join(c.dir, file))
}

// Confined is a process group in a cgroup of the harness's own, here or
// on a remote host (faults.Confined).
type Confined interface {
	Stat(file, key string) (int64, error)
	Undo() error
}

// Name is a new cgroup's name: lockbench-<pid>-<n>.
func Name() string {
	cgroupSeq.Lock()
	defer cgroupSeq.Unlock()
	cgroupSeq.n++
	return fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), cgroupSeq.n)
}

// StatValue sums the values that follow key in a cgroup file's text.
func StatValue(text, key, file string) (int64, error) {
	var total int64
	found := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		for i := 0; i+1 < len(fs); i++ {
			if fs[i] == key {
				if v, err := strconv.ParseInt(fs[i+1], 10, 64); err == nil {
					total += v
					found = true
				}
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("no %s in %s", key, file)
	}
	return total, nil
}

// Undo moves the processes back to the root cgroup and removes the cgroup.
func (c *Confinement) Undo() error {
	root := filepath.Join(Root, c.ctrl, "cgroup.procs")
	if b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(b)) {
			os.WriteFile(root, []byte(f), 0o644) // a process that exited meanwhile is gone from it anyway
		}
	}
	if err := os.Remove(c.dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove cgroup %s: %w", c.dir, err)
	}
	return nil
}

// CleanStale removes the cgroups of harnesses that are gone.
func CleanStale() {
	for _, ctrl := range []string{"cpu", "blkio"} {
		dirs, _ := filepath.Glob(filepath.Join(Root, ctrl, Prefix+"*"))
		for _, d := range dirs {
			var pid, n int
			if _, err := fmt.Sscanf(filepath.Base(d), Prefix+"%d-%d", &pid, &n); err != nil || pid == os.Getpid() {
				continue
			}
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				continue
			}
			(&Confinement{ctrl: ctrl, dir: d}).Undo()
		}
	}
}

// DeviceOf returns the major:minor of the block device holding path.
func DeviceOf(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return MajorMinor(uint64(st.Dev)), nil
}

// MajorMinor writes a device number as major:minor (glibc's encoding).
func MajorMinor(dev uint64) string {
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	return fmt.Sprintf("%d:%d", major, minor)
}
