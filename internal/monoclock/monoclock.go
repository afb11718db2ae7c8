// Package monoclock reads the system-wide monotonic clock.
//
// Go's time.Now carries a monotonic reading, but it is private to the
// process: two processes cannot compare them. lockbench runs every client in
// its own worker process, so every timestamp in a history is read from
// CLOCK_MONOTONIC directly, which all processes on one machine share and which
// NTP steps and wall-clock jumps do not move.
package monoclock

import "golang.org/x/sys/unix"

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC is always present on Linux; failing to read it
		// means the process cannot produce a meaningful history at all.
		panic("monoclock: CLOCK_MONOTONIC: " + err.Error())
	}
	return ts.Nano()
}

// Since returns the nanoseconds elapsed since base, a value taken from Now,
// possibly in another process.
func Since(base int64) int64 { return Now() - base }
