package powerfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// This file is the layer's mounts as the kernel has them: mounted with
// /dev/fuse close-on-exec, found again, and repaired after a dead run.

// mountLocked mounts the layer with /dev/fuse close-on-exec. go-fuse's
// direct mount opens /dev/fuse without O_CLOEXEC and never sets it, so
// every server started after it held the FUSE connection open: a harness
// killed by SIGKILL then left the connection alive with no daemon, and a
// server waiting on a flush in uninterruptible sleep forever. The fork lock
// is held from the open to the flag (no child is forked in between), and
// every /dev/fuse descriptor of the process is made close-on-exec: the
// connection dies with the harness, and a waiting server gets an error.
func mountLocked(mountpoint string, root fs.InodeEmbedder, opts *fs.Options) (*fuse.Server, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	srv, err := fs.Mount(mountpoint, root, opts)
	if cerr := devFuseCloseOnExec(); cerr != nil && err == nil {
		srv.Unmount()
		return nil, cerr
	}
	return srv, err
}

// devFuseCloseOnExec sets close-on-exec on every descriptor of this
// process open on /dev/fuse.
func devFuseCloseOnExec() error {
	fds, err := DevFuseFds(os.Getpid())
	if err != nil {
		return err
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			return fmt.Errorf("powerfs: close-on-exec on /dev/fuse (fd %d): %w", fd, err)
		}
	}
	return nil
}

// DevFuseFds lists the descriptors process pid has open on /dev/fuse.
func DevFuseFds(pid int) ([]int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	var out []int
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == "/dev/fuse" {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				out = append(out, fd)
			}
		}
	}
	return out, nil
}

// Sweep unmounts every layer a dead process left under prefix (the
// kernel keeps a FUSE mount whose daemon died, answering "transport
// endpoint is not connected"), aborting its connection first. It returns
// what it did, one line each.
func Sweep(prefix string) ([]string, error) {
	mounts, err := mountsUnder(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	var errs []error
	for _, m := range mounts {
		// Abort the connection first: a process waiting on it (a server
		// blocked in a flush, in uninterruptible sleep) gets an error
		// and can die; a detach alone leaves it waiting.
		if err := abortConn(m.Conn); err != nil {
			errs = append(errs, fmt.Errorf("abort FUSE connection %d of %s: %w", m.Conn, m.Point, err))
		} else if m.Conn >= 0 {
			out = append(out, fmt.Sprintf("aborted FUSE connection %d of %s", m.Conn, m.Point))
		}
		if err := syscall.Unmount(m.Point, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.Point, err))
			continue
		}
		out = append(out, "unmounted "+m.Point)
	}
	return out, errors.Join(errs...)
}

// connDir is where the kernel lists its FUSE connections (fusectl).
var connDir = "/sys/fs/fuse/connections"

// abortConn aborts FUSE connection n (when the control filesystem is
// there and the connection still is): every request waiting on it fails.
func abortConn(n int) error {
	if n < 0 {
		return nil
	}
	if err := fusectl(); err != nil {
		return err
	}
	p := fmt.Sprintf("%s/%d/abort", connDir, n)
	if _, err := os.Stat(p); err != nil {
		return nil // gone already
	}
	return os.WriteFile(p, []byte("1"), 0o200)
}

// fusectl mounts the FUSE control filesystem on connDir when it is not
// (systemd mounts it at boot; a container or a bare VM may not): the only
// way to abort a connection whose daemon is gone but whose descriptor a
// stuck process still holds.
func fusectl() error {
	if _, err := os.Stat(connDir); err != nil {
		return nil // no FUSE here
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), " - fusectl ") {
		return nil
	}
	if err := syscall.Mount("fusectl", connDir, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("mount fusectl on %s: %w", connDir, err)
	}
	return nil
}

// Mounting is a layer mounted: its mountpoint and its FUSE connection
// (-1 when unknown).
type Mounting struct {
	Point string
	Conn  int
}

// Mounted lists the layers mounted under prefix, live or dead.
func Mounted(prefix string) ([]string, error) {
	ms, err := mountsUnder(prefix)
	var out []string
	for _, m := range ms {
		out = append(out, m.Point)
	}
	return out, err
}

// mountsUnder lists the layers mounted under prefix with their FUSE
// connections (the number of the mount's device, as fusectl names it).
func mountsUnder(prefix string) ([]Mounting, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []Mounting
	for _, line := range strings.Split(string(data), "\n") {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 || g[1] != FsName {
			continue
		}
		if mp := unescapeMount(f[4]); strings.HasPrefix(mp, prefix) {
			m := Mounting{Point: mp, Conn: -1}
			var maj, min int
			if _, err := fmt.Sscanf(f[2], "%d:%d", &maj, &min); err == nil {
				m.Conn = maj<<20 | min // the kernel's dev_t, as fusectl prints it
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
