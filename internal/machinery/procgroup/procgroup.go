// Package procgroup runs and acts on process groups: a child started in a
// group of its own with the parent-death signal set (no child outlives
// the harness, even one killed with SIGKILL), a container standing for
// one (through the engine), or a process on another machine (a control
// plane's, through the Remote it gives). Signals, kills and the stopped
// state read the same for all three; a pause is recorded when it is sent
// (StoppedWithin), and what the kernel says now is Stopped.
package procgroup

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

	"github.com/lockbench/lockbench/internal/childenv"
	"github.com/lockbench/lockbench/internal/machinery/cgroup"
	"github.com/lockbench/lockbench/internal/machinery/docker"
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
	remote     Remote
	stopWatch  chan struct{}
	detachOnce sync.Once
}

// Remote is a server's process on another machine that a control plane
// acts on: on a host over SSH, or in a Kubernetes pod (package remote).
type Remote interface {
	Pid() int
	Signal(sig syscall.Signal) error
	// Kill kills it and waits up to timeout until it is seen gone.
	Kill(timeout time.Duration) error
	Stopped() (bool, error)
	// Watch closes done when the process has exited, or when stop closes.
	Watch(done chan struct{}, stop <-chan struct{})
	// Confine moves its process group into a cgroup of the harness's own
	// on its host.
	Confine(ctrl string, settings [][2]string) (cgroup.Confined, error)
}

// NewRemote stands for r, watching it until it exits or Detach.
func NewRemote(name string, r Remote) *Process {
	p := &Process{Name: name, done: make(chan struct{}), remote: r, stopWatch: make(chan struct{})}
	go r.Watch(p.done, p.stopWatch)
	return p
}

// Remote is the process on another machine p stands for, or nil.
func (p *Process) Remote() Remote { return p.remote }

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

// StartProcess starts cmd in its own process group with parent-death
// SIGKILL, and tags it with the run id.
func StartProcess(name, runID string, cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if cmd.Env == nil {
		cmd.Env = childenv.Env() // never bench's whole environment: its secrets stay with it
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
		return p.remote.Pid()
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

// ErrExited is the error of a signal to a process that has exited.
var ErrExited = errors.New("has exited")

// Signal sends sig to the whole process group.
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return fmt.Errorf("signal %s: %s %w", sig, p.Name, ErrExited)
	}
	if p.remote != nil {
		if err := p.remote.Signal(sig); err != nil {
			return fmt.Errorf("signal %s to %s: %w", sig, p.Name, err)
		}
	} else if p.container != "" {
		var err error
		switch sig {
		case syscall.SIGSTOP:
			_, err = docker.Run("pause", p.container)
		case syscall.SIGCONT:
			_, err = docker.Run("unpause", p.container)
		default:
			_, err = docker.Run("kill", "-s", fmt.Sprint(int(sig)), p.container)
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
		if err := p.remote.Kill(timeout); err != nil {
			return err
		}
		// The host said it is gone: the watcher need not see it too.
		p.detachOnce.Do(func() { close(p.stopWatch) })
	} else if p.container != "" {
		// A paused container must be let go before it can be killed.
		docker.Run("unpause", p.container)
		if _, err := docker.Run("kill", p.container); err != nil && !strings.Contains(err.Error(), "is not running") {
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
		return p.remote.Stopped()
	}
	if p.container != "" {
		out, err := docker.Run("inspect", "-f", "{{.State.Paused}}", p.container)
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

// Confine moves every process of the group into a new cgroup of
// controller ctrl with the given settings: on this machine, or over its
// control plane on the host of a remote process.
func (p *Process) Confine(ctrl string, settings [][2]string) (cgroup.Confined, error) {
	switch {
	case p.remote != nil:
		return p.remote.Confine(ctrl, settings)
	case p.container != "":
		return nil, fmt.Errorf("confine %s: a container; use the engine's own limits", p.Name)
	}
	pids, err := GroupPids(p.Pid())
	if err != nil {
		return nil, err
	}
	return cgroup.Confine(ctrl, pids, settings)
}

// GroupPids lists the processes of process group pgid.
func GroupPids(pgid int) ([]int, error) {
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

// CPU returns the CPU time (user and system) the process used; valid once
// it has exited, 0 before.
func (p *Process) CPU() time.Duration {
	if p.Alive() || p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}
