package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/internal/control"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHShell is one connection to a host, shared by every server on it, and
// one shell on it that runs the host's commands one after another.
//
// A shell kept open, not a session per command: sshd does not set
// TCP_NODELAY on a session without a terminal, so the handful of small
// messages that open, run and close a session wait on delayed ACKs, about
// 150 ms a command here even on an idle machine, and each session forks
// sshd and a shell besides. Through one shell a command costs about 3 ms,
// so a fault's effect is applied and observed when scheduled and the
// watchers' polling costs the host next to nothing.
type SSHShell struct {
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
	// The value is never put in a message: it may be the key itself,
	// in a form this does not recognise (a base64 blob).
	pem := []byte(v)
	if !strings.Contains(v, "PRIVATE KEY") {
		if !looksLikePath(v) {
			return nil, fmt.Errorf("ssh key: %s holds neither a PEM private key nor a file's path (its value is not shown)", env)
		}
		b, err := os.ReadFile(v)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // without the path, which is the value
			}
			return nil, fmt.Errorf("ssh key: the file %s names cannot be read: %w", env, err)
		}
		pem = b
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("ssh key from %s: %w", env, err)
	}
	return s, nil
}

// looksLikePath reports whether an SSH key variable's value can be a path:
// one line, of a sane length, no more than a file name could hold.
func looksLikePath(v string) bool {
	return len(v) < 4096 && !strings.ContainsAny(v, "\n\r\x00")
}

// DialSSH connects to the host s names, checking its key against the
// known_hosts file s names, with the key its key_env names.
func DialSSH(s control.SSH) (*SSHShell, error) {
	signer, err := sshSigner(s.KeyEnv)
	if err != nil {
		return nil, err
	}
	hk, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		return nil, fmt.Errorf("known_hosts %s: %w", s.KnownHosts, err)
	}
	h := &SSHShell{name: fmt.Sprintf("%s@%s", s.User, s.Addr()), addr: s.Addr(), cfg: &ssh.ClientConfig{
		User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk, Timeout: 5 * time.Second}}
	if _, err := h.client(); err != nil {
		return nil, err
	}
	return h, nil
}

// client is the host's connection, dialled again if it broke.
func (h *SSHShell) client() (*ssh.Client, error) {
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

// Run runs a shell command on the host and returns its trimmed output
// (stdout and stderr together); a command that exits non-zero is a
// *ExitError (wrapped). The command reads no input (its stdin is
// /dev/null). When ctx ends first, the shell is closed (the next command
// opens another) and the command may still run to its end on the host.
func (h *SSHShell) Run(ctx context.Context, cmd string) (string, error) {
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
			return text, fmt.Errorf("ssh %s: %q: %w: %s", h.name, cmd, &ExitError{Status: res.status}, text)
		}
		return text, nil
	}
}

// shell is the host's open shell, opened (and the connection dialled)
// when there is none.
func (h *SSHShell) shell() (*remoteShell, error) {
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
func (h *SSHShell) dropShell() {
	if h.sh != nil {
		h.sh.in.Close()
		h.sh.sess.Close()
		h.sh = nil
	}
}

// Close closes the shell and the connection.
func (h *SSHShell) Close() error {
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

// String names the host in messages.
func (h *SSHShell) String() string { return h.name }
