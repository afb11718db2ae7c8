package checker

import (
	"fmt"

	"github.com/lockbench/lockbench/history"
)

// OutOfOrder records that the record this case is part of is out of time
// order somewhere this case's own events do not show (a batch's other
// lane: MODEL §14): the record breaks its own rules.
func (c *Case) OutOfOrder() { c.orderErrs++ }

// Stray records an event that belongs to no unit the case is judged as (a
// lane's event on another lane's key; MODEL §14): it is counted nowhere
// else, and makes the case invalid with why.
func (c *Case) Stray(why string) {
	if c.strays == nil {
		c.strays = map[string]int{}
	}
	c.strays[why]++
}

func (c *Case) mark(e *history.Event) {
	switch e.F {
	case history.MarkCaseStop:
		if !c.stopped {
			c.stopped, c.stopT = true, e.T
			c.live.caseStop(e.T)
			c.fig.caseStop(e.T)
			for _, cl := range c.clientList {
				c.live.clientGone(cl, e.T)
				cl.waits = nil
			}
		}
	case history.MarkCaseEnd:
		c.finish(e.T)
		c.ended, c.endT = true, e.T
	case history.MarkFaultStart, history.MarkFaultEnd, history.MarkFaultError, history.MarkFaultUnobserved, history.MarkFaultIdle:
		c.faultMark(e)
	case history.MarkCrash:
		c.res.Crashes++
		inst, isClient, ok := parseProc(e.Proc)
		if !ok || isClient {
			c.malformed("crash mark of %q, which is not an instance", e.Proc)
			return
		}
		in := c.instance(inst)
		if !in.dead {
			msg := e.Err
			if msg == "" {
				msg = "no exit status"
			}
			if c.stopped {
				// Asked to stop, it did not exit cleanly (the runner says
				// why). What it did after the stop is unknown.
				c.crashes = append(c.crashes, fmt.Sprintf("instance %s did not exit cleanly when the case ended (%s)", e.Proc, msg))
			} else {
				c.crashes = append(c.crashes, fmt.Sprintf("instance %s died with no fault killing it (%s)", e.Proc, msg))
			}
		}
		c.die(in, e.T, false)
	case history.MarkHarness:
		c.harness.stats(e)
	case history.MarkResRead, history.MarkResWrite:
		r := &c.res.Resource
		if e.F == history.MarkResWrite {
			r.Writes++
			if e.Lost {
				r.LostUpdates++
			}
		}
		switch e.Fenced {
		case history.FencedRejected:
			if e.F == history.MarkResWrite {
				r.StaleRejected++
			} else {
				r.StaleReadsRejected++
			}
		case history.FencedStale:
			r.StaleAccepted++
		}
		if e.Reuse && c.meta.Fenced {
			r.TokenReuse++
		}
		if e.Late {
			c.harness.late(e.T)
		}
	}
}
