package worker

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is what the worker asks its event pipe to hold: 1 MiB (Linux's
// default pipe-max-size) instead of 64 KiB, so that a batch of events
// rarely finds the pipe full and the flusher rarely has to wait for the
// coordinator to read.
const pipeSize = 1 << 20

// growPipe enlarges w's pipe if w is one. Anything else (a file, a
// container runtime's stream) is left as it is: the size is a matter of
// cost, not of correctness.
func growPipe(w io.Writer) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) // not a pipe, or over the limit: keep what is there
	})
}
