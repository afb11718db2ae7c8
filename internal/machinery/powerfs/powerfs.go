// Package powerfs mounts a directory through a FUSE layer that remembers
// every write its files have not yet made durable, so that a power loss
// can be played: the server on top is killed, and what it wrote but never
// fsynced is discarded before it starts again (Jepsen's LazyFS fault
// "lose-unfsynced-writes" is the reference).
//
// Design decisions:
//   - Writes go straight through to the backing directory (reads see them,
//     as they would see the page cache); what the layer keeps is an undo
//     record per write (the bytes it overwrote and the file's size before),
//     per file, since the file's last fsync. Losing power applies a file's
//     records in reverse order, which brings it back to its content at its
//     last fsync (or at open, for a file never fsynced). Appends, which are
//     what write-ahead logs do, cost one size per write.
//   - fsync and fdatasync of a file make all its writes durable (both are
//     passed to the backing file, so their cost stays real); a file opened
//     with O_SYNC or O_DSYNC is durable at each write.
//   - Metadata (create, rename, unlink, mkdir) is durable at once: what
//     power loss takes is file data, the part fsync policies decide.
//     Records follow a file by its inode, so a renamed file still loses its
//     unsynced tail and an unlinked one is forgotten.
//   - SetFull plays a full disk on the same layer: every write, allocation
//     and creation fails with ENOSPC until it is freed (the server sees
//     its own error; reads and deletions go on).
//   - The layer runs in the process that mounts it. Lose unmounts it (the
//     kernel's cache of the old content goes with the mount), reverts the
//     backing files and mounts it again; a mount left by a process that
//     died is removed by Sweep.
package powerfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FsName is the name the layer's mounts show in /proc/self/mountinfo;
// Sweep finds stale mounts by it.
const FsName = "lockbench-powerfs"

// undo is what one write or truncate changed: the file's size before, and
// the bytes it overwrote inside that size.
type undo struct {
	off  int64
	old  []byte
	size int64
	n    int64 // bytes the write wrote (0 for a truncate)
}

// FS is a mounted layer.
type FS struct {
	Backing, Mountpoint string

	mu      sync.Mutex
	server  *fuse.Server
	pending map[uint64][]undo // by backing inode
	full    bool              // every write is refused with ENOSPC (SetFull)
	refused int64             // writes refused while full
}

// SetFull makes the layer a full disk (every write, allocation and
// creation fails with ENOSPC) or frees it again; it returns how many
// writes were refused since the last call.
func (f *FS) SetFull(full bool) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.refused
	f.full, f.refused = full, 0
	return n
}

// Refused is how many writes were refused since SetFull last said full.
func (f *FS) Refused() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// noSpace reports, and counts, a write refused by a full disk. The caller
// holds f.mu.
func (f *FS) noSpace() bool {
	if f.full {
		f.refused++
	}
	return f.full
}

// Available says whether a layer can be mounted here: /dev/fuse and the
// right to mount (root).
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("power-loss needs FUSE: %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("power-loss mounts a FUSE layer: run as root")
	}
	return nil
}

// Mount makes mountpoint show backing through the layer. Both must be
// directories.
func Mount(backing, mountpoint string) (*FS, error) {
	f := &FS{Backing: backing, Mountpoint: mountpoint, pending: map[uint64][]undo{}}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.Backing, &st); err != nil {
		return fmt.Errorf("powerfs: backing dir: %w", err)
	}
	// The root is a node of the layer's; every node under it is the
	// loopback's own, wrapped by its parent (node.WrapChild) as go-fuse
	// makes its inode.
	root := &fs.LoopbackRoot{Path: f.Backing, Dev: uint64(st.Dev)}
	rootNode := &node{LoopbackNode: &fs.LoopbackNode{RootData: root}, fs: f}
	root.RootNode = rootNode
	opts := &fs.Options{MountOptions: fuse.MountOptions{
		// Strict: no fallback to the fusermount helper, which would fork
		// while mountLocked holds the fork lock.
		FsName: FsName, Name: "powerfs", DirectMountStrict: true, AllowOther: true,
		// Servers read what they wrote: no cache that could outlive a loss.
		DisableXAttrs: true,
	}}
	srv, err := mountLocked(f.Mountpoint, rootNode, opts)
	if err != nil {
		return fmt.Errorf("powerfs: mount %s: %w", f.Mountpoint, err)
	}
	f.server = srv
	return nil
}

// Pending is how many bytes were written and not yet made durable.
func (f *FS) Pending() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, us := range f.pending {
		n += pendingBytes(us)
	}
	return n
}

// pendingBytes is how many bytes a file's records say were written since
// its last fsync.
func pendingBytes(us []undo) int64 {
	var n int64
	for _, u := range us {
		n += u.n
	}
	return n
}

// Settle makes every write so far durable, as a machine's writeback
// eventually does.
func (f *FS) Settle() {
	f.mu.Lock()
	f.pending = map[uint64][]undo{}
	f.mu.Unlock()
}

// Loss is what a power loss discarded.
type Loss struct {
	Bytes int64 // bytes written and never made durable
	Files int   // files they were in
}

// Lose plays a power loss: the layer is unmounted (whatever runs on it must
// be dead already), every write not made durable is undone in the backing
// files, and the layer is mounted again with nothing pending.
func (f *FS) Lose() (Loss, error) {
	if err := f.unmount(); err != nil {
		return Loss{}, err
	}
	f.mu.Lock()
	pending := f.pending
	f.pending = map[uint64][]undo{}
	f.mu.Unlock()
	loss, err := revert(f.Backing, pending)
	if err != nil {
		return loss, err
	}
	return loss, f.mount()
}

// Unmount removes the layer, keeping what was written (a clean shutdown).
func (f *FS) Unmount() error { return f.unmount() }

func (f *FS) unmount() error {
	if f.server == nil {
		return nil
	}
	// The processes of a killed server may take a moment to let go.
	var err error
	for i := 0; i < 40; i++ {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			f.server = nil
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Still busy: detach it; the kernel drops it when the last user goes.
	if derr := syscall.Unmount(f.Mountpoint, syscall.MNT_DETACH); derr != nil {
		return fmt.Errorf("powerfs: unmount %s: %v (detach: %v)", f.Mountpoint, err, derr)
	}
	f.server = nil
	return nil
}

// revert applies each file's undo records in reverse order. Files are
// found by inode under dir; those that are gone are forgotten.
func revert(dir string, pending map[uint64][]undo) (Loss, error) {
	var loss Loss
	if len(pending) == 0 {
		return loss, nil
	}
	paths := map[uint64]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if _, want := pending[st.Ino]; want {
				paths[st.Ino] = p
			}
		}
		return nil
	})
	if err != nil {
		return loss, fmt.Errorf("powerfs: walk %s: %w", dir, err)
	}
	inos := make([]uint64, 0, len(pending))
	for ino := range pending {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		p, ok := paths[ino]
		us := pending[ino]
		if !ok || len(us) == 0 {
			continue
		}
		n := pendingBytes(us)
		file, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return loss, fmt.Errorf("powerfs: revert %s: %w", p, err)
		}
		for i := len(us) - 1; i >= 0; i-- {
			u := us[i]
			// One err for both steps: a failed truncate or rewrite is a
			// loss that did not discard, never one reported as applied.
			err := file.Truncate(u.size)
			if err == nil && len(u.old) > 0 {
				_, err = file.WriteAt(u.old, u.off)
			}
			if err != nil {
				file.Close()
				return loss, fmt.Errorf("powerfs: revert %s: %w", p, err)
			}
		}
		if err := file.Close(); err != nil {
			return loss, fmt.Errorf("powerfs: revert %s: %w", p, err)
		}
		loss.Bytes += n
		loss.Files++
	}
	return loss, nil
}

// record keeps what a change of [off, off+n) on fd is about to overwrite;
// written is how many bytes the change writes. The caller holds f.mu.
func (f *FS) record(fd int, ino uint64, off, n, written int64) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	u := undo{off: off, size: st.Size, n: written}
	if off < st.Size && n > 0 {
		end := min(off+n, st.Size)
		u.old = make([]byte, end-off)
		if _, err := syscall.Pread(fd, u.old, off); err != nil {
			return err
		}
	}
	f.pending[ino] = append(f.pending[ino], u)
	return nil
}

// durable forgets a file's records: it was fsynced.
func (f *FS) durable(ino uint64) {
	f.mu.Lock()
	delete(f.pending, ino)
	f.mu.Unlock()
}

// node is a loopback node whose files record their writes.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeWrapChilder = (*node)(nil)
)

// WrapChild makes every node the loopback creates under n (a lookup, a
// create, a mkdir) a node of the layer's, so that its files record their
// writes too.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if lb, ok := ops.(*fs.LoopbackNode); ok {
		return &node{LoopbackNode: lb, fs: n.fs}
	}
	return ops
}

func (n *node) backing(name string) string {
	return filepath.Join(n.RootData.Path, n.Path(nil), name)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	flags = flags &^ (syscall.O_APPEND | fuse.FMODE_EXEC)
	osf, err := openBacking(n.backing(""), flags&^syscall.O_TRUNC)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	fh, errno := n.fs.wrap(osf, flags)
	if errno == 0 && flags&syscall.O_TRUNC != 0 {
		// O_TRUNC is a truncate like any other: recorded, then done.
		f := fh.(*file)
		if errno = f.truncating(0); errno == 0 {
			errno = fs.ToErrno(osf.Truncate(0))
		}
		if errno != 0 {
			osf.Close()
			return nil, 0, errno
		}
	}
	return fh, 0, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.fs.mu.Lock()
	full := n.fs.noSpace()
	n.fs.mu.Unlock()
	if full {
		return nil, nil, 0, syscall.ENOSPC
	}
	ch, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return ch, fh, ff, errno
	}
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return ch, fh, ff, errno
	}
	// The loopback file owns an fd we cannot reach: open our own twin and
	// let the loopback one go.
	osf, err := openBacking(n.backing(name), flags&^(syscall.O_APPEND|syscall.O_CREAT|syscall.O_EXCL|syscall.O_TRUNC))
	lf.Release(ctx)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	wrapped, errno := n.fs.wrap(osf, flags)
	return ch, wrapped, ff, errno
}

// openBacking opens a backing file for a handle. A write-only handle is
// opened read-write underneath: recording a write inside the file reads
// the bytes it overwrites (the kernel holds the caller to its own mode).
func openBacking(path string, flags uint32) (*os.File, error) {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		if f, err := os.OpenFile(path, int(flags&^syscall.O_ACCMODE|syscall.O_RDWR), 0); err == nil {
			return f, nil
		}
	}
	return os.OpenFile(path, int(flags), 0)
}

// Setattr records a truncate made by path or by handle.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if f, ok := fh.(*file); ok {
			if errno := f.truncating(int64(sz)); errno != 0 {
				return errno
			}
		} else if osf, err := os.Open(n.backing("")); err == nil {
			var st syscall.Stat_t
			err = syscall.Fstat(int(osf.Fd()), &st)
			if err == nil {
				n.fs.mu.Lock()
				err = n.fs.record(int(osf.Fd()), st.Ino, int64(sz), st.Size-int64(sz), 0)
				n.fs.mu.Unlock()
			}
			osf.Close()
			if err != nil {
				return fs.ToErrno(err)
			}
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// file is an open file whose writes are recorded until its next fsync.
type file struct {
	*fs.LoopbackFile
	fs   *FS
	fd   int
	ino  uint64
	sync bool // O_SYNC or O_DSYNC: every write is durable
}

func (f *FS) wrap(osf *os.File, flags uint32) (fs.FileHandle, syscall.Errno) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(osf.Fd()), &st); err != nil {
		osf.Close()
		return nil, fs.ToErrno(err)
	}
	return &file{
		LoopbackFile: fs.NewLoopbackFileFromOS(osf),
		fs:           f, fd: int(osf.Fd()), ino: st.Ino,
		sync: flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0,
	}, 0
}

var (
	_ fs.FileWriter          = (*file)(nil)
	_ fs.FileWritever        = (*file)(nil)
	_ fs.FileFsyncer         = (*file)(nil)
	_ fs.FileAllocater       = (*file)(nil)
	_ fs.FilePassthroughFder = (*file)(nil)
)

// PassthroughFd refuses kernel passthrough: every write must come here.
func (f *file) PassthroughFd() (int, bool) { return -1, false }

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.noSpace() {
		return 0, syscall.ENOSPC
	}
	if !f.sync {
		if err := f.fs.record(f.fd, f.ino, off, int64(len(data)), int64(len(data))); err != nil {
			return 0, fs.ToErrno(err)
		}
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var total uint32
	for _, d := range data {
		n, errno := f.Write(ctx, d, off)
		total += n
		off += int64(n)
		if errno != 0 || int(n) < len(d) {
			return total, errno
		}
	}
	return total, 0
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	errno := f.LoopbackFile.Fsync(ctx, flags)
	if errno == 0 {
		f.fs.durable(f.ino)
	}
	return errno
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.noSpace() {
		return syscall.ENOSPC
	}
	if !f.sync {
		if err := f.fs.record(f.fd, f.ino, int64(off), 0, 0); err != nil {
			return fs.ToErrno(err)
		}
	}
	return f.LoopbackFile.Allocate(ctx, off, size, mode)
}

func (f *file) truncating(size int64) syscall.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(f.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	if f.sync {
		return 0
	}
	return fs.ToErrno(f.fs.record(f.fd, f.ino, size, st.Size-size, 0))
}
