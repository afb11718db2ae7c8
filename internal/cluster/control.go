package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Control is how lockbench acts on a server it did not start (a targets
// file's control section, by server name): the host it runs on, reached
// over SSH, and how to find and start its process there. Through it the
// server faults act on remote servers as on local ones: pause and resume
// (SIGSTOP and SIGCONT of the server's process group), kill and restart
// (SIGKILL of the group, then Start), and cuts (iptables rules in a chain
// of this harness's own on the host: LOCKBENCH-<pid>, as locally).
//
//	control:
//	  redis-1:
//	    ssh: {host: 10.0.0.5, port: 22, user: root, key_env: LB_SSH_KEY, known_hosts: ./known_hosts}
//	    pid_file: /run/redis/redis.pid        # or pattern: "redis-server .*:6379", or unit: redis-server
//	    start: "redis-server /etc/redis/redis.conf --daemonize yes"   # a unit's start is systemctl start
//
// The key comes from the environment variable key_env names (the key
// itself, or a path to it), never from the file; host keys are checked
// against the known_hosts file the user names, and an unknown or changed
// host key refuses the connection.
type Control struct {
	SSH SSH `yaml:"ssh" json:"ssh"`
	// PidFile, Pattern or Unit finds the server's main process: a pid
	// file on the host, a pgrep -f pattern (the oldest match), or a
	// systemd unit's MainPID. Exactly one.
	PidFile string `yaml:"pid_file" json:"pid_file,omitempty"`
	Pattern string `yaml:"pattern" json:"pattern,omitempty"`
	Unit    string `yaml:"unit" json:"unit,omitempty"`
	// Start is the shell command that starts the server on the host
	// (restarts after a kill, and the repair of a server a killed run
	// left dead); with Unit, systemctl start when empty.
	Start string `yaml:"start" json:"start,omitempty"`
	// DataDir is the server's data directory on the host: a disk stall
	// throttles the writes to the disk that holds it. Optional; without
	// it, no disk fault reaches the server.
	DataDir string `yaml:"data_dir" json:"data_dir,omitempty"`
}

// Has reports whether the control section gives field (a yaml name:
// "data_dir"), which some actions need (Mode.ControlNeeds).
func (c *Control) Has(field string) bool {
	switch field {
	case "data_dir":
		return c != nil && c.DataDir != ""
	}
	return false
}

// SSH says how to reach a host.
type SSH struct {
	Host       string `yaml:"host" json:"host"`
	Port       int    `yaml:"port" json:"port,omitempty"`
	User       string `yaml:"user" json:"user"`
	KeyEnv     string `yaml:"key_env" json:"key_env"`
	KnownHosts string `yaml:"known_hosts" json:"known_hosts"`
}

// Check says what is wrong with a control section, or nil.
func (c *Control) Check() error {
	var errs []string
	if c.SSH.Host == "" {
		errs = append(errs, "ssh.host: missing")
	}
	if c.SSH.User == "" {
		errs = append(errs, "ssh.user: missing")
	}
	if c.SSH.KeyEnv == "" {
		errs = append(errs, "ssh.key_env: missing (the environment variable holding the private key, or its path)")
	}
	if c.SSH.KnownHosts == "" {
		errs = append(errs, "ssh.known_hosts: missing (host keys are always checked)")
	}
	if c.SSH.Port < 0 || c.SSH.Port > 65535 {
		errs = append(errs, fmt.Sprintf("ssh.port: %d is not a port", c.SSH.Port))
	}
	n := 0
	for _, s := range []string{c.PidFile, c.Pattern, c.Unit} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, "give exactly one of pid_file, pattern or unit (how the server's process is found)")
	}
	if c.Start == "" && c.Unit == "" {
		errs = append(errs, "start: missing (the command that starts the server, for restarts)")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// addr is the host's SSH address.
func (s SSH) addr() string {
	port := s.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(s.Host, strconv.Itoa(port))
}

// sshHost is one connection to a host, shared by every server on it, and
// one shell on it that runs the host's commands one after another.
//
// A shell kept open, not a session per command: sshd does not set
// TCP_NODELAY on a session without a terminal, so the handful of small
// messages that open, run and close a session wait on delayed ACKs, about
// 150 ms a command here even on an idle machine, and each session forks
// sshd and a shell besides. Through one shell a command costs about 3 ms,
// so a fault's effect is applied and observed when scheduled and the
// watchers' polling costs the host next to nothing.
type sshHost struct {
	name string // user@host:port, for messages
	cfg  *ssh.ClientConfig
	addr string

	mu sync.Mutex
	c  *ssh.Client
	// one serializes the host's commands: the shell runs one at a time.
	one sync.Mutex
	sh  *remoteShell // the open shell, or nil (opened at the next command)
	seq int          // numbers the commands' end markers
}

// remoteShell is a shell running on the host in one SSH session: a
// command is written to its stdin, and its output read until the marker
// line the shell prints after it with the command's exit status.
type remoteShell struct {
	sess *ssh.Session
	in   io.WriteCloser
	out  *bufio.Reader
}

// sshSigner reads the private key from the environment: the key itself,
// or the path of a file holding it.
func sshSigner(env string) (ssh.Signer, error) {
	v := os.Getenv(env)
	if v == "" {
		return nil, fmt.Errorf("ssh key: environment variable %s is not set", env)
	}
	pem := []byte(v)
	if !strings.Contains(v, "PRIVATE KEY") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("ssh key: %s names %q: %w", env, v, err)
		}
		pem = b
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("ssh key from %s: %w", env, err)
	}
	return s, nil
}

func newSSHHost(s SSH) (*sshHost, error) {
	signer, err := sshSigner(s.KeyEnv)
	if err != nil {
		return nil, err
	}
	hk, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		return nil, fmt.Errorf("known_hosts %s: %w", s.KnownHosts, err)
	}
	h := &sshHost{name: fmt.Sprintf("%s@%s", s.User, s.addr()), addr: s.addr(), cfg: &ssh.ClientConfig{
		User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk, Timeout: 5 * time.Second}}
	if _, err := h.client(); err != nil {
		return nil, err
	}
	return h, nil
}

// client is the host's connection, dialled again if it broke.
func (h *sshHost) client() (*ssh.Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		return h.c, nil
	}
	c, err := ssh.Dial("tcp", h.addr, h.cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", h.name, err)
	}
	h.c = c
	return c, nil
}

// run runs a shell command on the host and returns its trimmed output
// (stdout and stderr together); a command that exits non-zero is a
// *RemoteExit (wrapped). The command reads no input (its stdin is
// /dev/null). When ctx ends first, the shell is closed (the next command
// opens another) and the command may still run to its end on the host.
func (h *sshHost) run(ctx context.Context, cmd string) (string, error) {
	h.one.Lock()
	defer h.one.Unlock()
	for attempt := 0; ; attempt++ {
		sh, err := h.shell()
		if err != nil {
			if attempt == 0 {
				continue // the connection broke: dial again, once
			}
			return "", err
		}
		h.seq++
		marker := fmt.Sprintf("lockbench-end-%d-%d", os.Getpid(), h.seq)
		type result struct {
			out    string
			status int
			err    error
		}
		done := make(chan result, 1)
		go func() {
			if _, err := fmt.Fprintf(sh.in, "( %s\n) </dev/null 2>&1; printf '\\n%s %%d\\n' $?\n", cmd, marker); err != nil {
				done <- result{err: err}
				return
			}
			var b strings.Builder
			for {
				line, err := sh.out.ReadString('\n')
				if err != nil {
					done <- result{err: err}
					return
				}
				if rest, ok := strings.CutPrefix(line, marker+" "); ok {
					status, err := strconv.Atoi(strings.TrimSpace(rest))
					done <- result{out: b.String(), status: status, err: err}
					return
				}
				b.WriteString(line)
			}
		}()
		var res result
		select {
		case res = <-done:
		case <-ctx.Done():
			h.dropShell()
			return "", fmt.Errorf("ssh %s: %q: %w", h.name, cmd, ctx.Err())
		}
		if res.err != nil {
			h.dropShell()
			if attempt == 0 && res.out == "" {
				continue // the shell or the connection went away: once more
			}
			return "", fmt.Errorf("ssh %s: %q: %w", h.name, cmd, res.err)
		}
		text := strings.TrimSpace(res.out)
		if res.status != 0 {
			return text, fmt.Errorf("ssh %s: %q: %w: %s", h.name, cmd, &RemoteExit{Status: res.status}, text)
		}
		return text, nil
	}
}

// shell is the host's open shell, opened (and the connection dialled)
// when there is none.
func (h *sshHost) shell() (*remoteShell, error) {
	if h.sh != nil {
		return h.sh, nil
	}
	c, err := h.client()
	if err != nil {
		return nil, err
	}
	sess, err := c.NewSession()
	if err != nil {
		h.mu.Lock()
		if h.c == c {
			h.c.Close()
			h.c = nil
		}
		h.mu.Unlock()
		return nil, fmt.Errorf("ssh %s: %w", h.name, err)
	}
	in, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("ssh %s: %w", h.name, err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("ssh %s: %w", h.name, err)
	}
	// The user's own shell, as sshd runs a command with: the commands
	// (a control section's start among them) mean what they would mean
	// typed there.
	if err := sess.Start(`exec "${SHELL:-/bin/sh}"`); err != nil {
		sess.Close()
		return nil, fmt.Errorf("ssh %s: start a shell: %w", h.name, err)
	}
	h.sh = &remoteShell{sess: sess, in: in, out: bufio.NewReader(out)}
	return h.sh, nil
}

// dropShell closes the shell (after a failure or a command cut short).
func (h *sshHost) dropShell() {
	if h.sh != nil {
		h.sh.in.Close()
		h.sh.sess.Close()
		h.sh = nil
	}
}

// RemoteExit is a command on a host that exited with a non-zero status.
type RemoteExit struct{ Status int }

func (e *RemoteExit) Error() string { return fmt.Sprintf("exit status %d", e.Status) }

// exitedWith reports whether err is the remote command's exit status.
func exitedWith(err error) bool {
	var ee *RemoteExit
	return errors.As(err, &ee)
}

func (h *sshHost) close() error {
	h.one.Lock()
	h.dropShell()
	h.one.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return nil
	}
	err := h.c.Close()
	h.c = nil
	return err
}

// opTimeout bounds one command on a host.
const opTimeout = 10 * time.Second

func (h *sshHost) runT(cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return h.run(ctx, cmd)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// findPID is the shell command that prints the server's main pid.
func (c *Control) findPID() string {
	switch {
	case c.PidFile != "":
		return "cat " + shellQuote(c.PidFile)
	case c.Pattern != "":
		return "pgrep -o -f " + shellQuote(c.Pattern)
	}
	return "systemctl show -p MainPID --value " + shellQuote(c.Unit)
}

// startCmd is the shell command that starts the server.
func (c *Control) startCmd() string {
	if c.Start != "" {
		return c.Start
	}
	return "systemctl start " + shellQuote(c.Unit)
}

// remoteProc is a server's process on a host, acted on over SSH.
type remoteProc struct {
	h    *sshHost
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
func locate(h *sshHost, ctl *Control, name string) (*remoteProc, error) {
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, err := locateOnce(h, ctl, name)
		if err == nil || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func locateOnce(h *sshHost, ctl *Control, name string) (*remoteProc, error) {
	out, err := h.runT(ctl.findPID())
	if err != nil {
		return nil, fmt.Errorf("%s: find its process on %s: %w", name, h.name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("%s: no running process on %s (%s said %q)", name, h.name, ctl.findPID(), out)
	}
	g, err := h.runT(procFields(pid))
	f := strings.Fields(g)
	if err != nil || len(f) != 2 || f[0] == "Z" {
		return nil, fmt.Errorf("%s: process %d on %s is not running (%q, %v)", name, pid, h.name, g, err)
	}
	pgid, err := strconv.Atoi(f[1])
	if err != nil || pgid <= 1 {
		return nil, fmt.Errorf("%s: process group of %d on %s: %q", name, pid, h.name, g)
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
	_, err := r.h.runT(cmd)
	return err
}

// kill SIGKILLs the group (resuming it first: a stopped process dies of
// SIGKILL too, but its note must go) and waits for the main process to go.
func (r *remoteProc) kill(timeout time.Duration) error {
	if _, err := r.h.runT(fmt.Sprintf("kill -KILL -- -%d; rm -f %s", r.pgid, r.stateFile)); err != nil && !exitedWith(err) {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.exited() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("kill %d on %s: still running after %s", r.main, r.h.name, timeout)
}

// stopped reports whether every process of the group is stopped, as the
// host's kernel says (ps state T).
func (r *remoteProc) stopped() (bool, error) {
	out, err := r.h.runT(fmt.Sprintf("cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^[0-9]* (.*) //' | awk '$3 == %d { print $1 }'", r.pgid))
	if err != nil && !exitedWith(err) {
		return false, err
	}
	states := strings.Fields(out)
	if len(states) == 0 {
		return false, fmt.Errorf("no process of group %d on %s", r.pgid, r.h.name)
	}
	for _, s := range states {
		if s[0] != 'T' && s[0] != 't' {
			return false, nil
		}
	}
	return true, nil
}

// watch closes done when the main process has exited, or when stop
// closes. It polls every quarter second (each poll is an SSH session and
// three processes on the host); only the check's own exit status says
// the process is gone, seen twice in a row (an SSH error, or a check
// killed by a signal, is no answer).
func (r *remoteProc) watch(done chan struct{}, stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	gone := 0
	for {
		select {
		case <-stop:
			close(done)
			return
		case <-t.C:
		}
		if r.exited() {
			if gone++; gone == 2 {
				close(done)
				return
			}
			continue
		}
		gone = 0
	}
}

// exited reports whether the host says the main process is gone (the
// alive check's own answer, not a failure of it).
func (r *remoteProc) exited() bool {
	_, err := r.h.runT(aliveCmd(r.main))
	var ee *RemoteExit
	return errors.As(err, &ee) && ee.Status == goneStatus
}

// dataDevice is the major:minor of the disk holding the server's data
// directory on its host (Control.DataDir).
func (r *remoteProc) dataDevice() (string, error) {
	if r.ctl.DataDir == "" {
		return "", fmt.Errorf("the control section of the server on %s gives no data_dir", r.h.name)
	}
	out, err := r.h.runT("stat -L -c %d " + shellQuote(r.ctl.DataDir))
	if err != nil {
		return "", fmt.Errorf("data_dir %s on %s: %w", r.ctl.DataDir, r.h.name, err)
	}
	dev, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return "", fmt.Errorf("data_dir %s on %s: stat said %q", r.ctl.DataDir, r.h.name, out)
	}
	return majorMinor(dev), nil
}

// remoteConfinement is a remote process group in a cgroup of the
// harness's own on its host.
type remoteConfinement struct {
	h         *sshHost
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
	if _, err := r.h.runT(b.String()); err != nil {
		return nil, errors.Join(fmt.Errorf("confine group %d on %s (%s): %w", r.pgid, r.h.name, ctrl, err), c.Undo())
	}
	return c, nil
}

func (c *remoteConfinement) Stat(file, key string) (int64, error) {
	out, err := c.h.runT("cat " + c.dir + "/" + file)
	if err != nil {
		return 0, err
	}
	return statValue(out, key, c.h.name+":"+c.dir+"/"+file)
}

// Undo moves the processes back to the controller's root and removes the
// cgroup.
func (c *remoteConfinement) Undo() error {
	_, err := c.h.runT(fmt.Sprintf("[ -d %[1]s ] || exit 0; for p in $(cat %[1]s/cgroup.procs); do echo $p > %[2]s/%[3]s/cgroup.procs 2>/dev/null; done; rmdir %[1]s", c.dir, CgroupRoot, c.ctrl))
	return err
}

// remoteFirewall is this harness's chain on one host, jumped to from the
// host's OUTPUT: a cut from a server on that host is made where its
// packets leave.
type remoteFirewall struct {
	h     *sshHost
	chain string

	mu      sync.Mutex
	created bool
	next    int
}

func (f *remoteFirewall) ipt(args ...string) (string, error) {
	return f.h.runT("iptables -w " + strings.Join(args, " "))
}

func (f *remoteFirewall) ensure() error {
	if f.created {
		return nil
	}
	if _, err := f.ipt("-N", f.chain); err != nil {
		return err
	}
	if _, err := f.ipt("-I", "OUTPUT", "-j", f.chain); err != nil {
		f.ipt("-X", f.chain)
		return err
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

func removeRemoteChain(h *sshHost, chain string) error {
	_, err := h.runT(fmt.Sprintf("while iptables -w -D OUTPUT -j %[1]s 2>/dev/null; do :; done; iptables -w -F %[1]s && iptables -w -X %[1]s", chain))
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
	return 0, fmt.Errorf("rule %s not found in %s on %s", r.comment, r.f.chain, r.f.h.name)
}

// repairHost undoes what harnesses of this machine that are no longer
// running left on a host: their iptables chains, and the process groups
// they stopped (resumed). A host is driven from one control machine at a
// time: a chain or note of a pid not running here is a dead run's.
func repairHost(h *sshHost) ([]string, error) {
	out, err := h.runT("iptables -w -S | sed -n 's/^-N " + ChainPrefix + "\\([0-9]*\\)$/chain \\1/p'; for f in /tmp/lockbench-stopped-*; do [ -e \"$f\" ] && echo \"note $f $(cat $f)\"; done; for d in " + CgroupRoot + "/cpu/" + cgroupPrefix + "* " + CgroupRoot + "/blkio/" + cgroupPrefix + "*; do [ -d \"$d\" ] && echo \"cgroup $d\"; done; true")
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", h.name, err)
	}
	var did []string
	var errs []error
	alive := func(pid int) bool {
		err := syscall.Kill(pid, 0)
		return pid == os.Getpid() || err == nil || errors.Is(err, syscall.EPERM)
	}
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
			did = append(did, fmt.Sprintf("removed chain %s%s on %s", ChainPrefix, f[1], h.name))
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
			did = append(did, fmt.Sprintf("removed cgroup %s on %s", f[1], h.name))
		case len(f) == 3 && f[0] == "note":
			var pid, pgid int
			if _, err := fmt.Sscanf(f[1], "/tmp/lockbench-stopped-%d-%d", &pid, &pgid); err != nil || alive(pid) {
				continue
			}
			if _, err := h.runT(fmt.Sprintf("kill -CONT -- -%d; rm -f %s", pgid, f[1])); err != nil && !exitedWith(err) {
				errs = append(errs, err)
				continue
			}
			did = append(did, fmt.Sprintf("resumed process group %d on %s", pgid, h.name))
		}
	}
	return did, errors.Join(errs...)
}
