package driver

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// This file ends what a driver started: its descendants, even those that
// left its group, and whatever carries its tag.

// endChildren SIGKILLs the driver's descendants (found by parent, before
// the driver goes) and every process carrying its tag (found after: an
// orphan re-parented elsewhere), with their process groups when they made
// groups of their own; never the worker's group.
func (p *Process) endChildren() {
	own := syscall.Getpgrp()
	pids := append(descendants(p.cmd.Process.Pid), Leftovers(p.tag)...)
	for _, pid := range pids {
		if pid == os.Getpid() || pid == p.cmd.Process.Pid {
			continue
		}
		if pg, err := syscall.Getpgid(pid); err == nil && pg != own && pg > 1 {
			syscall.Kill(-pg, syscall.SIGKILL)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// descendants lists the processes below pid, by their parents.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	kids := map[int][]int{}
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				kids[pp] = append(kids[pp], c)
			}
		}
	}
	var out []int
	for todo := kids[pid]; len(todo) > 0; {
		c := todo[0]
		todo = append(todo[1:], kids[c]...)
		out = append(out, c)
	}
	return out
}
