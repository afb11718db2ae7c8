package backends

import (
	"sync"
	"time"
)

// Watchdog closes a lost channel when a lease's validity runs out. Validity
// is measured from the moment the acquire (or extend) was sent, minus a
// safety margin, as Redlock does: the server's key expires TTL after it
// received the command, which is later than the client sent it, so the
// client gives up first.
//
// A Go timer cannot fire while its process is stopped: after a SIGSTOP the
// signal arrives only when the process resumes. That is the GC-pause problem
// lockbench exists to show, so the watchdog does nothing to hide it.
//
// The deadline is also checked whenever Lost or Stop is called, so that a
// client that looks at its lease right after resuming sees it lost even if
// the timer's goroutine has not run yet.
type Watchdog struct {
	mu       sync.Mutex
	lost     chan struct{}
	timer    *time.Timer
	deadline time.Time
	done     bool
}

// NewWatchdog starts a watchdog that fires validity after it is created.
func NewWatchdog(validity time.Duration) *Watchdog {
	w := &Watchdog{lost: make(chan struct{}), deadline: time.Now().Add(validity)}
	w.timer = time.AfterFunc(validity, w.Fire)
	return w
}

// Lost returns the channel closed when the lease is lost.
func (w *Watchdog) Lost() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expireLocked()
	return w.lost
}

func (w *Watchdog) expireLocked() {
	if !w.done && !time.Now().Before(w.deadline) {
		w.done = true
		close(w.lost)
	}
}

// Reset restarts the countdown after a successful extension. It reports
// false if the lease was already lost.
func (w *Watchdog) Reset(validity time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	w.deadline = time.Now().Add(validity)
	w.timer.Reset(validity)
	return true
}

// Fire declares the lease lost now.
func (w *Watchdog) Fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.done = true
		close(w.lost)
	}
}

// Stop ends the watchdog (the lease is being released): it fires now if
// the validity has already run out, and never after.
func (w *Watchdog) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
	w.expireLocked()
	w.done = true
}
