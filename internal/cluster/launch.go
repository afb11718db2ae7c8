package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/wait"
)

// What the server kinds' Start (kind.go) use to bring their servers up
// in a mode that starts them (a launcher): an address and a port of the
// run's own, a data dir and a log, a process group, a readiness wait.

// allocIP gives a server its own address in the run's slot, so that
// faults can cut the links between two members or between a member and a
// client instance.
func (c *Cluster) allocIP() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextIP++
	return c.Slot.Server(c.nextIP)
}

// newServer gives a server of a single-port kind its own address and a
// free port there, and registers it.
func (c *Cluster) newServer(sp backends.ServerSpec) (*Server, int, error) {
	ip := c.allocIP()
	s := &Server{Spec: sp, IP: ip}
	if err := c.add(s); err != nil {
		return nil, 0, err
	}
	l, ok := c.place.(launcher)
	if !ok {
		return nil, 0, c.lacks("start", sp.Name)
	}
	port, err := l.port(ip)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	s.Addr = fmt.Sprintf("%s:%d", ip, port)
	c.mu.Unlock()
	return s, port, nil
}

// add registers a server and creates its data dir, its log path and, in
// hosts mode, its host.
func (c *Cluster) add(s *Server) error {
	l, ok := c.place.(launcher)
	if !ok {
		return c.lacks("start", s.Spec.Name)
	}
	if err := l.host(s); err != nil {
		return err
	}
	s.Dir = filepath.Join(c.dataDir, s.Spec.Name)
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("data dir for %s: %w", s.Spec.Name, err)
	}
	s.LogPath = filepath.Join(c.LogDir, s.Spec.Name+".log")
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("cluster is closed")
	}
	if _, dup := c.servers[s.Spec.Name]; dup {
		c.mu.Unlock()
		return fmt.Errorf("two servers named %s", s.Spec.Name)
	}
	c.servers[s.Spec.Name] = s
	c.order = append(c.order, s.Spec.Name)
	c.mu.Unlock()
	if c.power {
		return c.mountPower(s) // registered first: Close unmounts it
	}
	return nil
}

// launch starts s's process and waits until it answers.
func (c *Cluster) launch(ctx context.Context, s *Server) error {
	if err := c.spawn(s); err != nil {
		return err
	}
	return c.await(ctx, s)
}

// spawn starts s's process without waiting.
func (c *Cluster) spawn(s *Server) error {
	cmd, err := s.command()
	if err != nil {
		return fmt.Errorf("start %s: %w", s.Spec.Name, err)
	}
	if c.faketime[s.Spec.Name] {
		if cmd.Env, err = s.useFaketime(cmd.Env); err != nil {
			return fmt.Errorf("start %s: %w", s.Spec.Name, err)
		}
	}
	l, ok := c.place.(launcher)
	if !ok {
		return c.lacks("start", s.Spec.Name)
	}
	l.wrap(s.NS, cmd)
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log file for %s: %w", s.Spec.Name, err)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logf
	}
	p, err := procgroup.StartProcess(s.Spec.Name, c.RunID, cmd)
	logf.Close() // the child has its own copy
	if err != nil {
		return err
	}
	s.setProcess(p)
	return nil
}

// await waits until s answers; on failure the error names the server and
// quotes the end of its log (which stays in the results folder).
func (c *Cluster) await(ctx context.Context, s *Server) error {
	if err := s.ready(ctx, s.Process()); err != nil {
		return fmt.Errorf("%s did not become ready: %w\nlast lines of %s:\n%s", s.Spec.Name, err, s.LogPath, Tail(s.LogPath, 10))
	}
	return nil
}

// awaitAll waits for every member of an ensemble that was spawned.
func (c *Cluster) awaitAll(ctx context.Context, servers []*Server) error {
	for _, s := range servers {
		if err := c.await(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// poll calls try every 50ms until it succeeds, p exits, ctx ends or the
// timeout passes.
func poll(ctx context.Context, p *procgroup.Process, timeout time.Duration, try func() error) error {
	var last error
	ok, err := wait.Until(ctx, 50*time.Millisecond, timeout, func() (bool, error) {
		if p != nil && !p.Alive() {
			return false, fmt.Errorf("process exited: %v", p.ExitErr())
		}
		last = try()
		return last == nil, nil
	})
	switch {
	case err != nil || ok:
		return err
	}
	return fmt.Errorf("not ready within %s: %v", timeout, last)
}

// ErrMissingBinary wraps a missing server executable.
var ErrMissingBinary = errors.New("server binary not found")

// CheckBinaries verifies that the executables for specs exist, with a
// message saying how to get what is missing.
func CheckBinaries(specs []backends.ServerSpec) error {
	for _, sp := range specs {
		if _, err := binary(sp.Kind); err != nil {
			return fmt.Errorf("%s: %w", sp.Name, err)
		}
	}
	return nil
}

// Versions returns the version of each server kind in specs.
func Versions(specs []backends.ServerSpec) map[string]string {
	out := map[string]string{}
	for _, sp := range specs {
		if k, err := LookupKind(sp.Kind); err == nil && k.Version != nil {
			if _, done := out[sp.Kind]; !done {
				out[sp.Kind] = k.Version()
			}
		}
	}
	return out
}

// firstLine runs a command and returns the first line of its output.
func firstLine(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// Binary returns the executable of a server kind ("redis", "etcd", ...),
// or an error saying how to get it.
func Binary(kind string) (string, error) { return binary(kind) }
