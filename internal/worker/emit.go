package worker

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/monoclock"
)

// flushEvery bounds how long an event waits in the emitter's buffer.
const flushEvery = 5 * time.Millisecond

// emitter writes events in time order: each is timestamped and encoded
// into a buffer under one mutex, and a flusher writes the buffer out every
// flushEvery (or sooner when it grows), so a client never waits for a pipe
// write and the events of many clients go out in few system calls.
type emitter struct {
	mu      sync.Mutex
	base    int64
	buf     []byte
	spare   []byte // the buffer last written out, reused for the next batch
	oldest  int64  // timestamp of the oldest buffered event (0: empty)
	lagMax  int64  // longest wait between a timestamp and its write, since the last report
	err     error
	out     io.Writer
	wake    chan struct{}
	done    chan struct{}
	stopped bool
	writeMu sync.Mutex
}

func newEmitter(w io.Writer, base int64) *emitter {
	em := &emitter{base: base, out: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go em.flusher()
	return em
}

// emit timestamps e and queues it; the timestamp is taken under the same
// lock as the queueing, so the stream is ordered by time.
func (em *emitter) emit(e history.Event) {
	em.mu.Lock()
	if em.err != nil || em.stopped {
		em.mu.Unlock()
		return
	}
	e.T = monoclock.Since(em.base)
	if em.oldest == 0 {
		em.oldest = e.T + 1
	}
	em.buf = append(history.AppendJSON(em.buf, &e), '\n')
	// A store's beginning and end say who is inside a critical section
	// run in the backend's database: the coordinator aims holder faults
	// by them, so they go out at once rather than within flushEvery.
	// So does a client at an armed phase (gates.go): the fault waits
	// for it.
	now := len(em.buf) > 128<<10 || e.F == history.OpStore || e.F == MarkAtPhase
	em.mu.Unlock()
	if now {
		select {
		case em.wake <- struct{}{}:
		default:
		}
	}
}

func (em *emitter) flusher() {
	defer close(em.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-em.wake:
		}
		if !em.flush() {
			return
		}
	}
}

// flush writes what is buffered; it reports false once the emitter is
// closed and drained.
func (em *emitter) flush() bool {
	em.writeMu.Lock()
	defer em.writeMu.Unlock()
	em.mu.Lock()
	buf, oldest, stopped := em.buf, em.oldest, em.stopped
	em.buf, em.spare, em.oldest = em.spare[:0], nil, 0
	if oldest != 0 {
		if lag := monoclock.Since(em.base) - (oldest - 1); lag > em.lagMax {
			em.lagMax = lag
		}
	}
	em.mu.Unlock()
	if len(buf) > 0 {
		if _, err := em.out.Write(buf); err != nil {
			em.mu.Lock()
			if em.err == nil {
				em.err = err
			}
			em.mu.Unlock()
			return false
		}
	}
	// The two buffers take turns: no batch is allocated or grown afresh
	// (flush runs under writeMu, so only one batch is out at a time).
	em.mu.Lock()
	em.spare = buf
	em.mu.Unlock()
	return !stopped
}

// ticks sends a tick every TickEvery and a link report every ReportEvery
// until ctx ends.
func (em *emitter) ticks(ctx context.Context, d *links.Dialer) {
	t := time.NewTicker(TickEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(last) < ReportEvery {
			em.emit(history.Event{Type: history.Mark, F: MarkTick})
			continue
		}
		last = time.Now()
		em.mu.Lock()
		lag := em.lagMax
		em.lagMax = 0
		em.mu.Unlock()
		rep := Report{Links: d.Snapshot(), EmitLagMax: lag, Goroutines: runtime.NumGoroutine()}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rep.HeapBytes = int64(ms.HeapAlloc)
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			rep.FDs = len(fds)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			continue // a report of numbers always encodes
		}
		em.emit(history.Event{Type: history.Mark, F: MarkReport, Meta: b})
	}
}

// close flushes what is left and stops the flusher; it returns the first
// write error.
func (em *emitter) close() error {
	em.mu.Lock()
	already := em.stopped
	em.stopped = true
	em.mu.Unlock()
	if !already {
		select {
		case em.wake <- struct{}{}:
		default:
		}
		<-em.done
		em.flush()
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	return em.err
}
