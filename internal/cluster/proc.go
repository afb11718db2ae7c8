package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/monoclock"
)

// EnvRunID is set in the environment of every child the harness starts,
// with the run's id as value, so that tests (and people) can find them.
const EnvRunID = "LOCKBENCH_RUN_ID"

// Process is a child process in its own process group.
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid after done is closed

	mu sync.Mutex
	// stoppedAt and resumedAt are when Signal last stopped and resumed
	// the group (monoclock.Now): the one record of a pause, which the
	// runner asks (StoppedWithin) to tell a paused worker's late events
	// from the harness's.
	stoppedAt, resumedAt int64
	// container, when set, is the docker container this process stands
	// for (its cmd is a docker client attached to it: docker run -i, or
	// docker wait): signals, kills and the stopped state go through the
	// engine, and docker pause freezes the whole container as SIGSTOP
	// freezes a process group.
	container string
	// remote, when set, is the server process on another host this
	// Process stands for (a targets file's control plane): it has no
	// local command; signals, kills and the stopped state go over SSH, and
	// done closes when the remote process has exited.
	remote     remoteHandle
	stopWatch  chan struct{}
	detachOnce sync.Once
}

// remoteHandle is a server's process on another machine that a control
// plane acts on: on a host over SSH (remoteProc), or in a Kubernetes pod
// (onkube.go).
type remoteHandle interface {
	pid() int
	signal(sig syscall.Signal) error
	// kill kills it and waits up to timeout until it is seen gone.
	kill(timeout time.Duration) error
	stopped() (bool, error)
	// watch closes done when the process has exited, or when stop closes.
	watch(done chan struct{}, stop <-chan struct{})
	confine(ctrl string, settings [][2]string) (Confined, error)
	dataDevice() (string, error)
}

// newRemoteProcess stands for r, watching it until it exits or Detach.
func newRemoteProcess(name string, r remoteHandle) *Process {
	p := &Process{Name: name, done: make(chan struct{}), remote: r, stopWatch: make(chan struct{})}
	go r.watch(p.done, p.stopWatch)
	return p
}

// StartContainerProcess starts cmd, a docker client attached to container
// (it exits when the container stops), as a Process standing for the
// container.
func StartContainerProcess(name, runID, container string, cmd *exec.Cmd) (*Process, error) {
	p, err := StartProcess(name, runID, cmd)
	if err != nil {
		return nil, err
	}
	p.container = container
	return p, nil
}

// Detach ends the local docker client of a container process (the
// container itself keeps running) and waits for it.
func (p *Process) Detach() {
	if p.remote != nil {
		p.detachOnce.Do(func() { close(p.stopWatch) })
		<-p.done
		return
	}
	if p.Alive() {
		syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
}

// Container returns the docker container the process stands for, or "".
func (p *Process) Container() string { return p.container }

// dockerCmd runs the docker CLI and returns its trimmed output.
func dockerCmd(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(bytes.TrimSpace(out)), nil
}

// StartProcess starts cmd in its own process group with parent-death
// SIGKILL, and tags it with the run id.
func StartProcess(name, runID string, cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvRunID+"="+runID)
	err := cmd.Start()
	if w, ok := parentEnds.LoadAndDelete(cmd); ok {
		w.(*os.File).Close() // the child has its own copy
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// OutputPipe connects cmd's stdout to a pipe and returns its read end,
// for a cmd StartProcess will start. Unlike exec.Cmd's StdoutPipe, whose
// read end Wait closes as soon as the process has exited (and StartProcess
// waits at once, so the last lines a child wrote before exiting could be
// lost unread: a worker's final events, a test child's answer), the read
// end is the reader's to close, after EOF: every line the child wrote is
// read. StartProcess closes the parent's copy of the write end.
func OutputPipe(cmd *exec.Cmd) (io.ReadCloser, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	cmd.Stdout = w
	parentEnds.Store(cmd, w)
	return r, nil
}

// parentEnds holds, per command, the parent's copy of its OutputPipe's
// write end until StartProcess has started it.
var parentEnds sync.Map

// Pid returns the process id (also its process group id).
func (p *Process) Pid() int {
	if p.remote != nil {
		return p.remote.pid()
	}
	return p.cmd.Process.Pid
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns how the process ended; valid once Done is closed.
func (p *Process) ExitErr() error { return p.err }

// Alive reports whether the process has not exited yet.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the whole process group.
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return fmt.Errorf("signal %s: %s has exited", sig, p.Name)
	}
	if p.remote != nil {
		if err := p.remote.signal(sig); err != nil {
			return fmt.Errorf("signal %s to %s: %w", sig, p.Name, err)
		}
	} else if p.container != "" {
		var err error
		switch sig {
		case syscall.SIGSTOP:
			_, err = dockerCmd("pause", p.container)
		case syscall.SIGCONT:
			_, err = dockerCmd("unpause", p.container)
		default:
			_, err = dockerCmd("kill", "-s", fmt.Sprint(int(sig)), p.container)
		}
		if err != nil {
			return err
		}
	} else if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s to %s (pgid %d): %w", sig, p.Name, p.Pid(), err)
	}
	p.mu.Lock()
	switch sig {
	case syscall.SIGSTOP:
		p.stoppedAt = monoclock.Now()
	case syscall.SIGCONT:
		p.resumedAt = monoclock.Now()
	}
	p.mu.Unlock()
	return nil
}

// StoppedWithin reports whether Signal had the group stopped at some
// moment between from and to (monoclock times), by its last stop. It is
// what was signalled, for judging the events of that time; Stopped is
// what the kernel says now.
func (p *Process) StoppedWithin(from, to int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stoppedAt != 0 && p.stoppedAt <= to && (p.resumedAt < p.stoppedAt || p.resumedAt >= from)
}

// Kill SIGKILLs the process group and waits up to timeout for the exit.
func (p *Process) Kill(timeout time.Duration) error {
	if !p.Alive() {
		return nil
	}
	if p.remote != nil {
		if err := p.remote.kill(timeout); err != nil {
			return err
		}
		// The host said it is gone: the watcher need not see it too.
		p.detachOnce.Do(func() { close(p.stopWatch) })
	} else if p.container != "" {
		// A paused container must be let go before it can be killed.
		dockerCmd("unpause", p.container)
		if _, err := dockerCmd("kill", p.container); err != nil && !strings.Contains(err.Error(), "is not running") {
			return err
		}
	} else if err := syscall.Kill(-p.Pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s (pgid %d): %w", p.Name, p.Pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("kill %s (pgid %d): still running after %s", p.Name, p.Pid(), timeout)
	}
}

// Stopped reports whether every process of the group is stopped (state T,
// as SIGSTOP leaves it). It reads /proc: the state the kernel reports, not
// the signal that was sent.
func (p *Process) Stopped() (bool, error) {
	if !p.Alive() {
		return false, fmt.Errorf("%s has exited", p.Name)
	}
	if p.remote != nil {
		return p.remote.stopped()
	}
	if p.container != "" {
		out, err := dockerCmd("inspect", "-f", "{{.State.Paused}}", p.container)
		return out == "true", err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("read /proc: %w", err)
	}
	members := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, err := procStat(pid)
		if err != nil || pgrp != p.Pid() {
			continue // gone meanwhile, or another group
		}
		members++
		if state != 'T' && state != 't' {
			return false, nil
		}
	}
	if members == 0 {
		return false, fmt.Errorf("no process of %s's group (%d) in /proc", p.Name, p.Pid())
	}
	return true, nil
}

// procStat returns the state and process group of pid from /proc/pid/stat.
func procStat(pid int) (byte, int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("bad stat of %d", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, 0, fmt.Errorf("bad stat of %d", pid)
	}
	pgrp, err := strconv.Atoi(f[2])
	return f[0][0], pgrp, err
}

// CPU returns the CPU time (user and system) the process used; valid once
// it has exited, 0 before.
func (p *Process) CPU() time.Duration {
	if p.Alive() || p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}
