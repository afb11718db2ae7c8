package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/backends"
)

// Server is one running lock server.
type Server struct {
	Spec    backends.ServerSpec
	Addr    string // where it really listens
	Proxy   *toxiclient.Proxy
	Dir     string // private data directory
	LogPath string
	args    []string
	bin     string

	mu   sync.Mutex
	proc *Process
}

// Process returns the server's current process.
func (s *Server) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Cluster is the set of servers of one case, with a toxiproxy in front of
// every client link. Close tears everything down and is safe to call more
// than once.
type Cluster struct {
	RunID   string
	LogDir  string
	Toxi    *Toxi
	dataDir string

	mu      sync.Mutex
	servers map[string]*Server
	order   []string
	closed  bool
}

// New starts the toxiproxy server of a cluster. Server logs go to logDir;
// data lives in a private temp dir removed by Close.
func New(runID, logDir string) (*Cluster, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	dataDir, err := os.MkdirTemp("", "lockbench-data-")
	if err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	t, err := StartToxi()
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, err
	}
	return &Cluster{RunID: runID, LogDir: logDir, Toxi: t, dataDir: dataDir, servers: map[string]*Server{}}, nil
}

// Start launches every server in specs, waits until each answers, and puts
// a proxy named after the server in front of it.
func (c *Cluster) Start(ctx context.Context, specs []backends.ServerSpec) error {
	for _, sp := range specs {
		if err := c.startServer(ctx, sp); err != nil {
			return err
		}
	}
	return nil
}

// Endpoints maps each server name to its proxy address.
func (c *Cluster) Endpoints() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.servers))
	for name, s := range c.servers {
		out[name] = s.Proxy.Listen
	}
	return out
}

// Server returns the named server, or nil.
func (c *Cluster) Server(name string) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[name]
}

// Names lists the servers in start order.
func (c *Cluster) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

func (c *Cluster) startServer(ctx context.Context, sp backends.ServerSpec) error {
	switch sp.Kind {
	case "redis":
		return c.startRedis(ctx, sp)
	default:
		return fmt.Errorf("start %s: unknown server kind %q", sp.Name, sp.Kind)
	}
}

// RedisBinary is the redis-server executable to run.
var RedisBinary = "redis-server"

// ErrMissingBinary wraps a missing server executable.
var ErrMissingBinary = errors.New("server binary not found")

// CheckBinaries verifies that the executables for specs exist, with a
// message saying how to install what is missing.
func CheckBinaries(specs []backends.ServerSpec) error {
	for _, sp := range specs {
		if sp.Kind == "redis" {
			if _, err := exec.LookPath(RedisBinary); err != nil {
				return fmt.Errorf("%w: %s is needed for %s; install it with `apt-get install -y redis-server` (or run `make setup` as root)", ErrMissingBinary, RedisBinary, sp.Name)
			}
		}
	}
	return nil
}

func (c *Cluster) startRedis(ctx context.Context, sp backends.ServerSpec) error {
	bin, err := exec.LookPath(RedisBinary)
	if err != nil {
		return fmt.Errorf("%w: %s is needed for %s; install it with `apt-get install -y redis-server`", ErrMissingBinary, RedisBinary, sp.Name)
	}
	port, err := FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dataDir, sp.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir for %s: %w", sp.Name, err)
	}
	args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--daemonize", "no", "--protected-mode", "yes"}
	switch sp.Persistence {
	case "", "none":
		args = append(args, "--appendonly", "no")
	case "everysec", "always":
		args = append(args, "--appendonly", "yes", "--appendfsync", sp.Persistence)
	default:
		return fmt.Errorf("start %s: unknown persistence %q", sp.Name, sp.Persistence)
	}
	s := &Server{Spec: sp, Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir,
		LogPath: filepath.Join(c.LogDir, sp.Name+".log"), args: args, bin: bin}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("cluster is closed")
	}
	c.servers[sp.Name] = s
	c.order = append(c.order, sp.Name)
	c.mu.Unlock()
	if err := c.launch(ctx, s); err != nil {
		return err
	}
	p, err := c.Toxi.Proxy(sp.Name, s.Addr)
	if err != nil {
		return err
	}
	s.Proxy = p
	return nil
}

// launch starts s's process and waits until it answers PING.
func (c *Cluster) launch(ctx context.Context, s *Server) error {
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log file for %s: %w", s.Spec.Name, err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := StartProcess(s.Spec.Name, c.RunID, cmd)
	logf.Close() // the child has its own copy
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := waitRedis(ctx, s.Addr, p, 10*time.Second); err != nil {
		return fmt.Errorf("%s did not become ready: %w\nlast lines of %s:\n%s", s.Spec.Name, err, s.LogPath, Tail(s.LogPath, 10))
	}
	return nil
}

// waitRedis polls addr with a RESP PING until it answers +PONG.
func waitRedis(ctx context.Context, addr string, p *Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return fmt.Errorf("process exited: %v", p.ExitErr())
		}
		if last = pingRedis(addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer on %s within %s: %v", addr, timeout, last)
}

func pingRedis(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", strings.TrimSpace(line))
	}
	return nil
}

// Kill SIGKILLs the named server.
func (c *Cluster) Kill(name string) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("kill: no server %q", name)
	}
	return s.Process().Kill(5 * time.Second)
}

// Restart starts a killed server again with the same port, data directory
// and persistence, and waits until it answers.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("restart: no server %q", name)
	}
	if p := s.Process(); p != nil && p.Alive() {
		return fmt.Errorf("restart %s: still running", name)
	}
	return c.launch(ctx, s)
}

// Signal sends sig to the named server's process group.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	s := c.Server(name)
	if s == nil {
		return fmt.Errorf("signal: no server %q", name)
	}
	return s.Process().Signal(sig)
}

// Close kills every server, stops toxiproxy and removes the data dir.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	servers := make([]*Server, 0, len(c.servers))
	for _, s := range c.servers {
		servers = append(servers, s)
	}
	c.mu.Unlock()
	var errs []error
	for _, s := range servers {
		if p := s.Process(); p != nil {
			if err := p.Kill(5 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.Toxi.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.dataDir); err != nil {
		errs = append(errs, fmt.Errorf("remove data dir: %w", err))
	}
	return errors.Join(errs...)
}

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Version runs `redis-server --version` and returns its first line.
func RedisVersion() string {
	out, err := exec.Command(RedisBinary, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
