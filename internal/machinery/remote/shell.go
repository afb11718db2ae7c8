// Package remote acts on servers lockbench did not start, through a
// shell on the machine they run on (Shell): a host reached over SSH, or
// the agent container of a Kubernetes pod. Over it, written once: how a
// server's process is found, signalled, killed, watched and confined in a
// cgroup (Proc), the harness's iptables chain there (Chain), and the
// repair of what a dead run left (Repair). A targets file's control
// section (package control) says where a server is and how to find its
// process.
package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// OpTimeout bounds one command on a host.
const OpTimeout = 10 * time.Second

// Shell is a machine lockbench runs shell commands on, one at a time: a
// server's host over SSH (SSHShell), or the agent container in a
// server's pod through the Kubernetes API (PodShell, in a bench built
// with -tags kubernetes). The process, cgroup, firewall and repair logic
// of this package is written once over it.
type Shell interface {
	// Run runs cmd and returns its trimmed output; a command that exits
	// non-zero is an *ExitError (wrapped).
	Run(ctx context.Context, cmd string) (string, error)
	// String names the host in messages (user@host:port, a pod).
	String() string
}

// RunT runs cmd on h, bounded by OpTimeout.
func RunT(h Shell, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	return h.Run(ctx, cmd)
}

// Quote quotes s for a POSIX shell.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ExitError is a command on a host that exited with a non-zero status.
type ExitError struct{ Status int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Status) }

// Exited reports whether err is the remote command's exit status.
func Exited(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee)
}
