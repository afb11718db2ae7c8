// Package wait holds the two ways lockbench waits: for a time, and for a
// condition, both cut short when a context ends. One copy, used by the
// backends, the faults, the cluster, the worker and the runner.
package wait

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done; it reports whether d fully elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Until calls cond every interval until it is true or errs, d passes or
// ctx ends; it reports whether cond became true. cond is called at least
// once, and once more at the deadline's edge; the error is cond's, or
// ctx's when it ended first.
func Until(ctx context.Context, every, d time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil || ok {
			return ok, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		if !Sleep(ctx, min(every, time.Until(deadline))) {
			return false, ctx.Err()
		}
	}
}
