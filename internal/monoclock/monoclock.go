// Package monoclock reads the system-wide monotonic clock.
//
// Go's time.Now carries a monotonic reading, but it is private to the
// process: two processes cannot compare them. lockbench runs every client in
// its own worker process, so every timestamp in a history is on
// CLOCK_MONOTONIC, which all processes on one machine share and which NTP
// steps and wall-clock jumps do not move.
//
// Reading CLOCK_MONOTONIC through a system call costs far more than the
// vDSO read behind time.Now, and a busy worker stamps hundreds of thousands
// of events a second. So the process reads it once at start, bracketed by
// two time.Now readings (the tightest of several tries), and from then on
// adds Go's own monotonic elapsed time: the offset error is the width of
// the bracket, well under a microsecond, far below the round trip of any
// lock operation.
package monoclock

import (
	"time"

	"golang.org/x/sys/unix"
)

var (
	ref  time.Time // a time.Now reading ...
	mono int64     // ... and CLOCK_MONOTONIC at the same instant
	// Uncertainty is the width of the bracket the offset was taken in.
	Uncertainty time.Duration
)

func init() { calibrate() }

func calibrate() {
	best := time.Duration(1<<62 - 1)
	for i := 0; i < 20; i++ {
		a := time.Now()
		m := raw()
		b := time.Now()
		if w := b.Sub(a); w < best {
			best = w
			ref, mono = a.Add(w/2), m
		}
	}
	Uncertainty = best
}

// raw reads CLOCK_MONOTONIC with a system call.
func raw() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC is always present on Linux; failing to read it
		// means the process cannot produce a meaningful history at all.
		panic("monoclock: CLOCK_MONOTONIC: " + err.Error())
	}
	return ts.Nano()
}

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return mono + int64(time.Since(ref)) }

// Since returns the nanoseconds elapsed since base, a value taken from Now,
// possibly in another process.
func Since(base int64) int64 { return Now() - base }
