package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// opTimeout bounds one command on a host.
const opTimeout = 10 * time.Second

// host is a machine lockbench runs shell commands on, one at a time: a
// server's host over SSH (sshHost), or the agent container in a server's
// pod through the Kubernetes API (onkube.go). The remote process, cgroup,
// firewall and repair logic below is written once over it.
type host interface {
	run(ctx context.Context, cmd string) (string, error)
	// String names the host in messages (user@host:port, a pod).
	String() string
}

// runT runs cmd on h, bounded by opTimeout.
func runT(h host, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return h.run(ctx, cmd)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// remoteProc is a server's process on a host, acted on over SSH.
type remoteProc struct {
	h    host
	ctl  *Control
	main int // its main pid
	pgid int // its process group
	// stateDir is where the harness notes, on the host, the groups it
	// stopped (so that the next run resumes them if this one dies).
	stateFile string
}

// procFields prints a process's state and process group from
// /proc/<pid>/stat (after its command name, which may hold spaces), or
// fails when there is no such process.
func procFields(pid int) string {
	return fmt.Sprintf("sed 's/.*) //' /proc/%d/stat | cut -d' ' -f1,3", pid)
}

// goneStatus is the exit status of aliveCmd when the process is gone:
// one no failure of the check itself gives.
const goneStatus = 3

// aliveCmd exits 0 while a process runs and goneStatus once it has gone
// (a zombie has gone too: it only waits for a parent that may never reap
// it).
func aliveCmd(pid int) string {
	return fmt.Sprintf("[ -e /proc/%[1]d ] || exit %[2]d; s=$(sed 's/.*) //' /proc/%[1]d/stat 2>/dev/null | cut -d' ' -f1); [ \"$s\" = Z ] && exit %[2]d; exit 0", pid, goneStatus)
}

// locate finds the server's process on its host: its main pid, which must
// be running, and its process group (a server just started may not have
// written its pid file yet: a few seconds are allowed).
func locate(h host, ctl *Control, name string) (*remoteProc, error) {
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, err := locateOnce(h, ctl, name)
		if err == nil || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func locateOnce(h host, ctl *Control, name string) (*remoteProc, error) {
	out, err := runT(h, ctl.findPID())
	if err != nil {
		return nil, fmt.Errorf("%s: find its process on %s: %w", name, h, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("%s: no running process on %s (%s said %q)", name, h, ctl.findPID(), out)
	}
	g, err := runT(h, procFields(pid))
	f := strings.Fields(g)
	if err != nil || len(f) != 2 || f[0] == "Z" {
		return nil, fmt.Errorf("%s: process %d on %s is not running (%q, %v)", name, pid, h, g, err)
	}
	pgid, err := strconv.Atoi(f[1])
	if err != nil || pgid <= 1 {
		return nil, fmt.Errorf("%s: process group of %d on %s: %q", name, pid, h, g)
	}
	return &remoteProc{h: h, ctl: ctl, main: pid, pgid: pgid,
		stateFile: fmt.Sprintf("/tmp/lockbench-stopped-%d-%d", os.Getpid(), pgid)}, nil
}

func (r *remoteProc) pid() int { return r.main }

// signal signals the server's process group. A stop is noted on the host
// before it is sent and the note removed after the group is resumed, so a
// harness killed in between leaves the next run a note to resume it by.
func (r *remoteProc) signal(sig syscall.Signal) error {
	cmd := fmt.Sprintf("kill -%d -- -%d", int(sig), r.pgid)
	switch sig {
	case syscall.SIGSTOP:
		cmd = fmt.Sprintf("echo %d > %s && %s", r.pgid, r.stateFile, cmd)
	case syscall.SIGCONT:
		cmd = fmt.Sprintf("%s && rm -f %s", cmd, r.stateFile)
	}
	_, err := runT(r.h, cmd)
	return err
}

// kill SIGKILLs the group (resuming it first: a stopped process dies of
// SIGKILL too, but its note must go) and waits for the main process to go.
func (r *remoteProc) kill(timeout time.Duration) error {
	if _, err := runT(r.h, fmt.Sprintf("kill -KILL -- -%d; rm -f %s", r.pgid, r.stateFile)); err != nil && !exitedWith(err) {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.exited() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("kill %d on %s: still running after %s", r.main, r.h, timeout)
}

// stopped reports whether every process of the group is stopped, as the
// host's kernel says (ps state T).
func (r *remoteProc) stopped() (bool, error) {
	out, err := runT(r.h, fmt.Sprintf("cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^[0-9]* (.*) //' | awk '$3 == %d { print $1 }'", r.pgid))
	if err != nil && !exitedWith(err) {
		return false, err
	}
	states := strings.Fields(out)
	if len(states) == 0 {
		return false, fmt.Errorf("no process of group %d on %s", r.pgid, r.h)
	}
	for _, s := range states {
		if s[0] != 'T' && s[0] != 't' {
			return false, nil
		}
	}
	return true, nil
}

// watch closes done when the main process has exited, or when stop
// closes. Only the check's own exit status says the process is gone (an
// error of the transport, or a check killed by a signal, is no answer).
func (r *remoteProc) watch(done chan struct{}, stop <-chan struct{}) {
	watchGone(done, stop, r.exited)
}

// watchGone polls gone every quarter second and closes done once it has
// said so twice in a row (one answer may be a glitch), or when stop
// closes: the watch of a process that runs elsewhere.
func watchGone(done chan struct{}, stop <-chan struct{}, gone func() bool) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	seen := 0
	for {
		select {
		case <-stop:
			close(done)
			return
		case <-t.C:
		}
		if !gone() {
			seen = 0
			continue
		}
		if seen++; seen == 2 {
			close(done)
			return
		}
	}
}

// exited reports whether the host says the main process is gone (the
// alive check's own answer, not a failure of it).
func (r *remoteProc) exited() bool {
	_, err := runT(r.h, aliveCmd(r.main))
	var ee *RemoteExit
	return errors.As(err, &ee) && ee.Status == goneStatus
}

// dataDevice is the major:minor of the disk holding the server's data
// directory on its host (Control.DataDir).
func (r *remoteProc) dataDevice() (string, error) {
	if r.ctl.DataDir == "" {
		return "", fmt.Errorf("the control section of the server on %s gives no data_dir", r.h)
	}
	out, err := runT(r.h, "stat -L -c %d "+shellQuote(r.ctl.DataDir))
	if err != nil {
		return "", fmt.Errorf("data_dir %s on %s: %w", r.ctl.DataDir, r.h, err)
	}
	dev, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return "", fmt.Errorf("data_dir %s on %s: stat said %q", r.ctl.DataDir, r.h, out)
	}
	return majorMinor(dev), nil
}

// remoteConfinement is a remote process group in a cgroup of the
// harness's own on its host.
type remoteConfinement struct {
	h         host
	ctrl, dir string
}

// confine moves every process of the group into a new cgroup of ctrl on
// the host (cgroup v1, as locally), with settings written in order.
func (r *remoteProc) confine(ctrl string, settings [][2]string) (Confined, error) {
	c := &remoteConfinement{h: r.h, ctrl: ctrl, dir: fmt.Sprintf("%s/%s/%s", CgroupRoot, ctrl, cgroupName())}
	var b strings.Builder
	fmt.Fprintf(&b, "[ -e %s/%s/cgroup.procs ] || { echo 'no cgroup v1 %s controller on this host' >&2; exit 1; }; mkdir %s", CgroupRoot, ctrl, ctrl, c.dir)
	for _, kv := range settings {
		fmt.Fprintf(&b, " && echo %s > %s/%s", shellQuote(kv[1]), c.dir, kv[0])
	}
	fmt.Fprintf(&b, ` && for p in $(cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^\([0-9]*\) (.*) [^ ]* [0-9]* \([0-9]*\) .*/\1 \2/' | awk '$2 == %d { print $1 }'); do echo $p > %s/cgroup.procs 2>/dev/null; done; [ -n "$(cat %s/cgroup.procs)" ]`, r.pgid, c.dir, c.dir)
	if _, err := runT(r.h, b.String()); err != nil {
		return nil, errors.Join(fmt.Errorf("confine group %d on %s (%s): %w", r.pgid, r.h, ctrl, err), c.Undo())
	}
	return c, nil
}

func (c *remoteConfinement) Stat(file, key string) (int64, error) {
	out, err := runT(c.h, "cat "+c.dir+"/"+file)
	if err != nil {
		return 0, err
	}
	return statValue(out, key, c.h.String()+":"+c.dir+"/"+file)
}

// Undo moves the processes back to the controller's root and removes the
// cgroup.
func (c *remoteConfinement) Undo() error {
	_, err := runT(c.h, fmt.Sprintf("[ -d %[1]s ] || exit 0; for p in $(cat %[1]s/cgroup.procs); do echo $p > %[2]s/%[3]s/cgroup.procs 2>/dev/null; done; rmdir %[1]s", c.dir, CgroupRoot, c.ctrl))
	return err
}

// remoteFirewall is this harness's chain on one host, jumped to from the
// host's OUTPUT: a cut from a server on that host is made where its
// packets leave.
type remoteFirewall struct {
	h     host
	chain string

	mu      sync.Mutex
	created bool
	next    int
}

func (f *remoteFirewall) ipt(args ...string) (string, error) {
	return runT(f.h, "iptables -w "+strings.Join(args, " "))
}

func (f *remoteFirewall) ensure() error {
	if f.created {
		return nil
	}
	if _, err := f.ipt("-N", f.chain); err != nil {
		return err
	}
	// From OUTPUT for what the host's server sends; from INPUT (not on
	// lo: no packet is seen twice) for what a server with no control
	// plane sends it, which only the receiving host can drop.
	for _, jump := range [][]string{append([]string{"-I", "OUTPUT"}, jumpOut(f.chain)...), append([]string{"-I", "INPUT"}, jumpIn(f.chain)...)} {
		if _, err := f.ipt(jump...); err != nil {
			removeRemoteChain(f.h, f.chain)
			return err
		}
	}
	f.created = true
	return nil
}

// DropSome drops each packet from src to dst with probability p.
func (f *remoteFirewall) DropSome(src, dst Endpoint, p float64) (Cut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.ensure(); err != nil {
		return nil, err
	}
	f.next++
	r := &remoteRule{f: f, comment: fmt.Sprintf("lockbench-%d", f.next)}
	r.spec = dropSpec(src, dst, p, r.comment)
	if _, err := f.ipt(append([]string{"-A", f.chain}, r.spec...)...); err != nil {
		return nil, err
	}
	return r, nil
}

// close removes the jump, the rules and the chain.
func (f *remoteFirewall) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.created {
		return nil
	}
	f.created = false
	return removeRemoteChain(f.h, f.chain)
}

func removeRemoteChain(h host, chain string) error {
	_, err := runT(h, fmt.Sprintf("while iptables -w -D OUTPUT -j %[1]s 2>/dev/null; do :; done; while iptables -w -D INPUT ! -i lo -j %[1]s 2>/dev/null; do :; done; iptables -w -F %[1]s && iptables -w -X %[1]s", chain))
	return err
}

type remoteRule struct {
	f       *remoteFirewall
	spec    []string
	comment string
}

func (r *remoteRule) Undo() error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if !r.f.created {
		return nil
	}
	_, err := r.f.ipt(append([]string{"-D", r.f.chain}, r.spec...)...)
	return err
}

func (r *remoteRule) Packets() (int64, error) {
	out, err := r.f.ipt("-L", r.f.chain, "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "/* "+r.comment+" */") {
			if f := strings.Fields(line); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("rule %s not found in %s on %s", r.comment, r.f.chain, r.f.h)
}

// harnessAlive reports whether the harness of pid runs on this machine
// (this one, or another that still runs).
func harnessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return pid == os.Getpid() || err == nil || errors.Is(err, syscall.EPERM)
}

// repairHost undoes what harnesses that are no longer running (alive
// says which are) left on a host: their iptables chains, and the process groups
// they stopped (resumed). A host is driven from one control machine at a
// time: a chain or note of a pid not running here is a dead run's.
func repairHost(h host, alive func(pid int) bool) ([]string, error) {
	out, err := runT(h, "iptables -w -S | sed -n 's/^-N "+ChainPrefix+"\\([0-9]*\\)$/chain \\1/p'; for f in /tmp/lockbench-stopped-*; do [ -e \"$f\" ] && echo \"note $f $(cat $f)\"; done; for d in "+CgroupRoot+"/cpu/"+cgroupPrefix+"* "+CgroupRoot+"/blkio/"+cgroupPrefix+"*; do [ -d \"$d\" ] && echo \"cgroup $d\"; done; true")
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
			if err := removeRemoteChain(h, ChainPrefix+f[1]); err != nil {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("removed chain %s%s on %s", ChainPrefix, f[1], h))
		case len(f) == 2 && f[0] == "cgroup":
			var pid, n int
			ctrl, name, _ := strings.Cut(strings.TrimPrefix(f[1], CgroupRoot+"/"), "/")
			if _, err := fmt.Sscanf(name, cgroupPrefix+"%d-%d", &pid, &n); err != nil || alive(pid) {
				continue
			}
			if err := (&remoteConfinement{h: h, ctrl: ctrl, dir: f[1]}).Undo(); err != nil {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("removed cgroup %s on %s", f[1], h))
		case len(f) == 3 && f[0] == "note":
			var pid, pgid int
			if _, err := fmt.Sscanf(filepath.Base(f[1]), "lockbench-stopped-%d-%d", &pid, &pgid); err != nil || alive(pid) {
				continue
			}
			if _, err := runT(h, fmt.Sprintf("kill -CONT -- -%d; rm -f %s", pgid, f[1])); err != nil && !exitedWith(err) {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("resumed process group %d on %s", pgid, h))
		}
	}
	return did, errors.Join(errs...)
}
