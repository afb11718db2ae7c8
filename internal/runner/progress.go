package runner

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/internal/scenario"
)

// progress prints a status line for the case every second until stopped.
func (r *run) progress(c *scenario.Case, idx int) (stop func()) {
	w := r.opts.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				f, _ := r.fault.Load().(string)
				if f == "" {
					f = "none"
				}
				fmt.Fprintf(w, "\r\033[K[%d/%d %s] %s/%s  acquisitions %d  fault: %s", idx+1, r.ncases, c.Name,
					time.Since(start).Round(time.Second), c.Workload.Duration, r.acquired.Load(), f)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
