package worker

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
)

// exitBroken is the exit status of an instance whose client broke.
const exitBroken = 3

var brokenOnce sync.Once

// watchBroken ends the instance when a client's Locker breaks
// (backends.Breakable: a driver that crashed, hung or wrote what its
// protocol does not allow): every result after that would mean nothing.
// The reason is the log's last line, "bench: instance N: ...", which the
// coordinator quotes in the crash it records, so the case is invalid and
// says why. The process exits at once: a driver that broke was killed
// already, and any other dies with it (parent-death signal).
func watchBroken(l backends.Locker, instance history.Instance, logw io.Writer) {
	b, ok := l.(backends.Breakable)
	if !ok {
		return
	}
	go func() {
		<-b.Broken()
		brokenOnce.Do(func() {
			fmt.Fprintf(logw, "bench: instance %d: %v\n", instance, b.Err())
			os.Exit(exitBroken)
		})
	}()
}
