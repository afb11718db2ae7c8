package cluster

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

// CgroupRoot is where the cgroup (v1) controllers are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// cgroupPrefix names the cgroups lockbench makes: lockbench-<pid>-<n>, so
// that those of a killed harness can be recognised and removed.
const cgroupPrefix = "lockbench-"

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

// CgroupsAvailable says whether cgroup v1 controller ctrl can be used.
func CgroupsAvailable(ctrl string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("confining a process (cgroup %s) needs root", ctrl)
	}
	if _, err := os.Stat(filepath.Join(CgroupRoot, ctrl, "cgroup.procs")); err != nil {
		return fmt.Errorf("no cgroup v1 %s controller at %s: %w", ctrl, filepath.Join(CgroupRoot, ctrl), err)
	}
	return nil
}

// Confine moves every process of process group pgid into a new cgroup of
// controller ctrl with the given settings (file name to value, written in
// order: a quota after its period).
func Confine(ctrl string, pgid int, settings [][2]string) (*Confinement, error) {
	if err := CgroupsAvailable(ctrl); err != nil {
		return nil, err
	}
	pids, err := groupPids(pgid)
	if err != nil {
		return nil, err
	}
	name := cgroupName()
	c := &Confinement{ctrl: ctrl, dir: filepath.Join(CgroupRoot, ctrl, name)}
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
	return statValue(string(b), key, filepath.Join(c.dir, file))
}

// Confined is a process group in a cgroup of the harness's own, here or
// on a remote host (faults.Confined).
type Confined interface {
	Stat(file, key string) (int64, error)
	Undo() error
}

// ConfineProcess confines p's process group: on this machine, or over
// its control plane on the host of a targets file's server.
func ConfineProcess(p *Process, ctrl string, settings [][2]string) (Confined, error) {
	if p.remote != nil {
		return p.remote.confine(ctrl, settings)
	}
	return Confine(ctrl, p.Pid(), settings)
}

// cgroupName is a new cgroup's name: lockbench-<pid>-<n>.
func cgroupName() string {
	cgroupSeq.Lock()
	defer cgroupSeq.Unlock()
	cgroupSeq.n++
	return fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgroupSeq.n)
}

// statValue sums the values that follow key in a cgroup file's text.
func statValue(text, key, file string) (int64, error) {
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
	root := filepath.Join(CgroupRoot, c.ctrl, "cgroup.procs")
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

// groupPids lists the processes of process group pgid.
func groupPids(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, pgrp, err := procStat(pid); err == nil && pgrp == pgid {
			out = append(out, pid)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process in group %d", pgid)
	}
	return out, nil
}

// CleanStaleCgroups removes the cgroups of harnesses that are gone.
func CleanStaleCgroups() {
	for _, ctrl := range []string{"cpu", "blkio"} {
		dirs, _ := filepath.Glob(filepath.Join(CgroupRoot, ctrl, cgroupPrefix+"*"))
		for _, d := range dirs {
			var pid, n int
			if _, err := fmt.Sscanf(filepath.Base(d), cgroupPrefix+"%d-%d", &pid, &n); err != nil || pid == os.Getpid() {
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
	return majorMinor(uint64(st.Dev)), nil
}

// majorMinor writes a device number as major:minor (glibc's encoding).
func majorMinor(dev uint64) string {
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	return fmt.Sprintf("%d:%d", major, minor)
}

// DataDevice is the major:minor of the disk holding a server's data: its
// data dir here, or the data_dir its control section names on its host.
func DataDevice(s *Server) (string, error) {
	if p := s.Process(); p != nil && p.remote != nil {
		return p.remote.dataDevice()
	}
	if s.Dir == "" {
		return "", fmt.Errorf("%s has no data directory here", s.Spec.Name)
	}
	return DeviceOf(s.Dir)
}
