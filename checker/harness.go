package checker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/history"
)

// Harness is what the harness measured of itself during a case. A case
// whose figures describe the harness rather than the lock (requests to the
// protected resource failing or arriving after their client gave up with
// no fault to explain it, events lost or stuck in a worker, a saturated
// coordinator) is degraded: it is invalid, with these reasons, and never a
// pass.
type Harness struct {
	// ResourceErrors and LateRequests count failed requests to the
	// protected resource and requests that reached it after their client's
	// deadline, outside every fault window (and its aftermath).
	ResourceErrors int                   `json:"resource_errors"`
	LateRequests   int                   `json:"late_requests"`
	Stats          *history.HarnessStats `json:"stats,omitempty"`
	Degraded       []string              `json:"degraded,omitempty"`
}

// EventsLost reports whether worker output lines were lost: lines that
// were not events.
func (h Harness) EventsLost() bool { return h.Stats != nil && h.Stats.BadLines > 0 }

// Limits of a healthy harness.
const (
	// MaxEmitLag is the longest an event may wait inside a worker.
	MaxEmitLag = time.Second
	// MaxCoordinatorShare is the share of the machine's cores the
	// coordinator may use before it, not the lock, sets the pace.
	MaxCoordinatorShare = 0.75
	// MaxHarnessShare is the share of the machine's cores the coordinator
	// and the workers together may use: beyond it the servers run short
	// of CPU, and latency and timeouts describe the machine. Measured at
	// 16,000 redis clients on 2 cores: the harness took 1.94 cores and
	// 74% of the acquisitions timed out, with nothing else amiss.
	MaxHarnessShare = 0.9
)

type harnessCheck struct {
	grace   int64 // how long after a fault heals its trouble may still show
	active  int
	lastEnd int64
	h       Harness
}

func (c *harnessCheck) init(meta history.CaseMeta) {
	c.grace = meta.OpTimeoutNs + int64(time.Second)
	if meta.OpTimeoutNs == 0 {
		c.grace = int64(2 * time.Second)
	}
	c.lastEnd = -1 << 62
}

func (c *harnessCheck) faultStart(int64) { c.active++ }

func (c *harnessCheck) faultEnd(t int64) {
	if c.active > 0 {
		c.active--
	}
	c.lastEnd = t
}

// quiet reports whether t is outside every fault window and its aftermath.
func (c *harnessCheck) quiet(t int64) bool { return c.active == 0 && t > c.lastEnd+c.grace }

func (c *harnessCheck) resourceError(t int64) {
	if c.quiet(t) {
		c.h.ResourceErrors++
	}
}

func (c *harnessCheck) late(t int64) {
	if c.quiet(t) {
		c.h.LateRequests++
	}
}

func (c *harnessCheck) stats(e *history.Event) {
	var s history.HarnessStats
	if json.Unmarshal(e.Meta, &s) == nil {
		c.h.Stats = &s
	}
}

// result returns the harness figures with the reasons it was degraded.
func (c *harnessCheck) result() Harness {
	h := c.h
	if h.ResourceErrors > 0 {
		h.Degraded = append(h.Degraded, fmt.Sprintf("%d request(s) to the protected resource failed outside any fault", h.ResourceErrors))
	}
	if h.LateRequests > 0 {
		h.Degraded = append(h.Degraded, fmt.Sprintf("%d request(s) reached the protected resource after their client had given up, outside any fault", h.LateRequests))
	}
	if s := h.Stats; s != nil {
		if s.BadLines > 0 {
			h.Degraded = append(h.Degraded, fmt.Sprintf("%d line(s) of worker output were not events: events were lost (any of them could have been a release, a lost-lease signal or a store operation: no overlap, zombie or store damage the record shows is proven)", s.BadLines))
		}
		if lag := time.Duration(s.EmitLagMaxNs); lag > MaxEmitLag {
			h.Degraded = append(h.Degraded, fmt.Sprintf("a worker took %s to get an event out (limit %s)", lag.Round(time.Millisecond), MaxEmitLag))
		}
		if s.Cores > 0 && s.CoordinatorCPU > MaxCoordinatorShare*float64(s.Cores) {
			h.Degraded = append(h.Degraded, fmt.Sprintf("the coordinator used %.2f of %d cores: the harness, not the lock, set the pace", s.CoordinatorCPU, s.Cores))
		} else if all := s.CoordinatorCPU + s.WorkersCPU; s.Cores > 0 && all > MaxHarnessShare*float64(s.Cores) {
			h.Degraded = append(h.Degraded, fmt.Sprintf("the harness (coordinator and workers) used %.2f of %d cores: the servers ran short of CPU, so latency and timeouts describe the machine, not the lock", all, s.Cores))
		}
	}
	return h
}
