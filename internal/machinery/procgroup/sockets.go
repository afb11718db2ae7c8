package procgroup

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// tcpEstablished is the state /proc/net/tcp gives an established socket.
const tcpEstablished = 1

// Connections returns the remote addresses ("ip:port") of the established
// TCP connections process pid holds open, as the kernel lists them in the
// process's own network namespace (/proc/<pid>/net/tcp, matched to the
// sockets among its file descriptors). It is how the harness sees which
// server a client is talking to now, rather than asking the client: the
// connected-member role (faults.RoleConnectedMember) reads it.
func Connections(pid int) ([]string, error) {
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		return nil, err
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	fds, err := p.FileDescriptorTargets()
	if err != nil {
		return nil, fmt.Errorf("file descriptors of process %d: %w", pid, err)
	}
	inodes := map[uint64]bool{}
	for _, t := range fds {
		if s, ok := strings.CutPrefix(t, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	ns, err := procfs.NewFS(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, read := range []func() (procfs.NetTCP, error){ns.NetTCP, ns.NetTCP6} {
		lines, err := read()
		if err != nil {
			continue // no IPv6 in this namespace, say
		}
		for _, l := range lines {
			if l.St == tcpEstablished && inodes[l.Inode] {
				out = append(out, net.JoinHostPort(l.RemAddr.String(), strconv.FormatUint(l.RemPort, 10)))
			}
		}
	}
	return out, nil
}
