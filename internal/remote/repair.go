package remote

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/lockbench/lockbench/internal/cgroup"
	"github.com/lockbench/lockbench/internal/firewall"
)

// HarnessAlive reports whether the harness of pid runs on this machine
// (this one, or another that still runs).
func HarnessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return pid == os.Getpid() || err == nil || errors.Is(err, syscall.EPERM)
}

// Repair undoes what harnesses that are no longer running (alive
// says which are) left on a host: their iptables chains, and the process groups
// they stopped (resumed). A host is driven from one control machine at a
// time: a chain or note of a pid not running here is a dead run's.
func Repair(h Shell, alive func(pid int) bool) ([]string, error) {
	out, err := RunT(h, "iptables -w -S | sed -n 's/^-N "+firewall.ChainPrefix+"\\([0-9]*\\)$/chain \\1/p'; for f in /tmp/lockbench-stopped-*; do [ -e \"$f\" ] && echo \"note $f $(cat $f)\"; done; for d in "+cgroup.Root+"/cpu/"+cgroup.Prefix+"* "+cgroup.Root+"/blkio/"+cgroup.Prefix+"*; do [ -d \"$d\" ] && echo \"cgroup $d\"; done; true")
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", h, err)
	}
	var did []string
	var errs []error
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "chain":
			pid, err := strconv.Atoi(f[1])
			if err != nil || alive(pid) {
				continue
			}
			if err := removeChain(h, firewall.ChainPrefix+f[1]); err != nil {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("removed chain %s%s on %s", firewall.ChainPrefix, f[1], h))
		case len(f) == 2 && f[0] == "cgroup":
			var pid, n int
			ctrl, name, _ := strings.Cut(strings.TrimPrefix(f[1], cgroup.Root+"/"), "/")
			if _, err := fmt.Sscanf(name, cgroup.Prefix+"%d-%d", &pid, &n); err != nil || alive(pid) {
				continue
			}
			if err := (&confinement{h: h, ctrl: ctrl, dir: f[1]}).Undo(); err != nil {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("removed cgroup %s on %s", f[1], h))
		case len(f) == 3 && f[0] == "note":
			var pid, pgid int
			if _, err := fmt.Sscanf(filepath.Base(f[1]), "lockbench-stopped-%d-%d", &pid, &pgid); err != nil || alive(pid) {
				continue
			}
			if _, err := RunT(h, fmt.Sprintf("kill -CONT -- -%d; rm -f %s", pgid, f[1])); err != nil && !Exited(err) {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("resumed process group %d on %s", pgid, h))
		}
	}
	return did, errors.Join(errs...)
}
