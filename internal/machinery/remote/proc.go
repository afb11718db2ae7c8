package remote

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
)

// Proc is a server's process on a host, acted on through the host's
// shell (over SSH, or in a pod's agent container): procgroup.Remote.
type Proc struct {
	h    Shell
	ctl  *control.Section
	main int // its main pid
	pgid int // its process group
	// stateFile is where the harness notes, on the host, that it stopped
	// the group (so that the next run resumes it if this one dies): a
	// file of NotesDir's, made at the first stop.
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

// Locate finds the server's process on its host: its main pid, which must
// be running, and its process group (a server just started may not have
// written its pid file yet: a few seconds are allowed).
func Locate(h Shell, ctl *control.Section, name string) (*Proc, error) {
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, err := LocateOnce(h, ctl, name)
		if err == nil || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LocateOnce is one try of Locate.
func LocateOnce(h Shell, ctl *control.Section, name string) (*Proc, error) {
	out, err := RunT(h, findPID(ctl))
	if err != nil {
		return nil, fmt.Errorf("%s: find its process on %s: %w", name, h, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("%s: no running process on %s (%s said %q)", name, h, findPID(ctl), out)
	}
	g, err := RunT(h, procFields(pid))
	f := strings.Fields(g)
	if err != nil || len(f) != 2 || f[0] == "Z" {
		return nil, fmt.Errorf("%s: process %d on %s is not running (%q, %v)", name, pid, h, g, err)
	}
	pgid, err := strconv.Atoi(f[1])
	if err != nil || pgid <= 1 {
		return nil, fmt.Errorf("%s: process group of %d on %s: %q", name, pid, h, g)
	}
	// A process just started from this shell (setsid ... &) may not have
	// left the shell's own group yet: signalling that group would stop the
	// shell itself. Locate tries again.
	if own, err := RunT(h, "sed 's/.*) //' /proc/$$/stat | cut -d' ' -f3"); err == nil && strings.TrimSpace(own) == f[1] {
		return nil, fmt.Errorf("%s: process %d on %s is still in the harness shell's process group", name, pid, h)
	}
	return &Proc{h: h, ctl: ctl, main: pid, pgid: pgid}, nil
}

// Pid is the server's main pid on its host.
func (r *Proc) Pid() int { return r.main }

// Group is the process group it leads on its host.
func (r *Proc) Group() int { return r.pgid }

// Note is the file on its host that notes, while the harness has the
// group stopped, that it did (so that a later run resumes it if this one
// dies before it does); "" before the first stop.
func (r *Proc) Note() string { return r.stateFile }

// Shell is the shell of the host the process runs on.
func (r *Proc) Shell() Shell { return r.h }

// Signal signals the server's process group. A stop is noted on the host
// before it is sent and the note removed after the group is resumed, so a
// harness killed in between leaves the next run a note to resume it by.
func (r *Proc) Signal(sig syscall.Signal) error {
	cmd := fmt.Sprintf("kill -%d -- -%d", int(sig), r.pgid)
	switch sig {
	case syscall.SIGSTOP:
		if r.stateFile == "" {
			dir, err := NotesDir(r.h)
			if err != nil {
				return err
			}
			r.stateFile = dir + "/" + noteName(os.Getpid(), r.pgid)
		}
		cmd = fmt.Sprintf("printf '%%d\\n' %d > %s && %s", r.pgid, Quote(r.stateFile), cmd)
	case syscall.SIGCONT:
		cmd += r.rmNote(" && ")
	}
	_, err := RunT(r.h, cmd)
	return err
}

// Kill SIGKILLs the group (resuming it first: a stopped process dies of
// SIGKILL too, but its note must go) and waits for the main process to go.
func (r *Proc) Kill(timeout time.Duration) error {
	if _, err := RunT(r.h, fmt.Sprintf("kill -KILL -- -%d", r.pgid)+r.rmNote("; ")); err != nil && !Exited(err) {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.Exited() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("kill %d on %s: still running after %s", r.main, r.h, timeout)
}

// rmNote is the command that removes the group's note, after sep, or ""
// when the harness never stopped the group.
func (r *Proc) rmNote(sep string) string {
	if r.stateFile == "" {
		return ""
	}
	return sep + "rm -f -- " + Quote(r.stateFile)
}

// Stopped reports whether every process of the group is stopped, as the
// host's kernel says (ps state T).
func (r *Proc) Stopped() (bool, error) {
	out, err := RunT(r.h, fmt.Sprintf("cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^[0-9]* (.*) //' | awk '$3 == %d { print $1 }'", r.pgid))
	if err != nil && !Exited(err) {
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

// Watch closes done when the main process has exited, or when stop
// closes. Only the check's own exit status says the process is gone (an
// error of the transport, or a check killed by a signal, is no answer).
func (r *Proc) Watch(done chan struct{}, stop <-chan struct{}) {
	WatchGone(done, stop, r.Exited)
}

// WatchGone polls gone every quarter second and closes done once it has
// said so twice in a row (one answer may be a glitch), or when stop
// closes: the watch of a process that runs elsewhere.
func WatchGone(done chan struct{}, stop <-chan struct{}, gone func() bool) {
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

// Exited reports whether the host says the main process is gone (the
// alive check's own answer, not a failure of it).
func (r *Proc) Exited() bool {
	_, err := RunT(r.h, aliveCmd(r.main))
	var ee *ExitError
	return errors.As(err, &ee) && ee.Status == goneStatus
}

// DataDevice is the major:minor of the disk holding the server's data
// directory on its host (control.Section.DataDir).
func (r *Proc) DataDevice() (string, error) {
	if r.ctl.DataDir == "" {
		return "", fmt.Errorf("the control section of the server on %s gives no data_dir", r.h)
	}
	out, err := RunT(r.h, "stat -L -c %d "+Quote(r.ctl.DataDir))
	if err != nil {
		return "", fmt.Errorf("data_dir %s on %s: %w", r.ctl.DataDir, r.h, err)
	}
	dev, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return "", fmt.Errorf("data_dir %s on %s: stat said %q", r.ctl.DataDir, r.h, out)
	}
	return cgroup.MajorMinor(dev), nil
}

// confinement is a remote process group in a cgroup of the
// harness's own on its host.
type confinement struct {
	h         Shell
	ctrl, dir string
}

// Confine moves every process of the group into a new cgroup of ctrl on
// the host (cgroup v1, as locally), with settings written in order.
func (r *Proc) Confine(ctrl string, settings [][2]string) (cgroup.Confined, error) {
	c := &confinement{h: r.h, ctrl: ctrl, dir: fmt.Sprintf("%s/%s/%s", cgroup.Root, ctrl, cgroup.Name())}
	var b strings.Builder
	fmt.Fprintf(&b, "[ -e %s/%s/cgroup.procs ] || { echo 'no cgroup v1 %s controller on this host' >&2; exit 1; }; mkdir %s", cgroup.Root, ctrl, ctrl, c.dir)
	for _, kv := range settings {
		fmt.Fprintf(&b, " && echo %s > %s/%s", Quote(kv[1]), c.dir, kv[0])
	}
	fmt.Fprintf(&b, ` && for p in $(cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^\([0-9]*\) (.*) [^ ]* [0-9]* \([0-9]*\) .*/\1 \2/' | awk '$2 == %d { print $1 }'); do echo $p > %s/cgroup.procs 2>/dev/null; done; [ -n "$(cat %s/cgroup.procs)" ]`, r.pgid, c.dir, c.dir)
	if _, err := RunT(r.h, b.String()); err != nil {
		return nil, errors.Join(fmt.Errorf("confine group %d on %s (%s): %w", r.pgid, r.h, ctrl, err), c.Undo())
	}
	return c, nil
}

func (c *confinement) Stat(file, key string) (int64, error) {
	out, err := RunT(c.h, "cat "+c.dir+"/"+file)
	if err != nil {
		return 0, err
	}
	return cgroup.StatValue(out, key, c.h.String()+":"+c.dir+"/"+file)
}

// Undo moves the processes back to the controller's root and removes the
// cgroup.
func (c *confinement) Undo() error {
	_, err := RunT(c.h, fmt.Sprintf("[ -d %[1]s ] || exit 0; for p in $(cat %[1]s/cgroup.procs); do echo $p > %[2]s/%[3]s/cgroup.procs 2>/dev/null; done; rmdir %[1]s", c.dir, cgroup.Root, c.ctrl))
	return err
}

// findPID is the shell command that prints the server's main pid.
func findPID(c *control.Section) string {
	switch {
	case c.PidFile != "":
		return "cat " + Quote(c.PidFile)
	case c.Pattern != "":
		return "pgrep -o -f -- " + Quote(c.Pattern)
	}
	return "systemctl show -p MainPID --value " + Quote(c.Unit)
}

// StartCmd is the shell command that starts the server.
func StartCmd(c *control.Section) string {
	if c.Start != "" {
		return c.Start
	}
	return "systemctl start " + Quote(c.Unit)
}
