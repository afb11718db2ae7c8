package checker

import (
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// faultRec follows one scheduled fault through its marks (MODEL §10).
type faultRec struct {
	name, typ, group string
	scheduled        string // target as written
	target           string // concrete target(s), from its fault-start
	started, ended   bool
	start, end       int64
	errMsg           string // fault-error
	healErr          string // fault-end's err
	unobserved       string
	idle             string
	acqStart, acqEnd int
	nextGrant        int64 // the first live client's grant after its start (-1: none)
}

// observed reports whether f was applied, healed and seen to act.
func (f *faultRec) observed() bool {
	return f.started && f.ended && f.errMsg == "" && f.healErr == "" && f.unobserved == "" && f.idle == ""
}

// judgeable reports whether availability after f is judged (MODEL §11):
// not for a fault that makes the case invalid by itself.
func (f *faultRec) judgeable() bool {
	return f.started && f.ended && f.errMsg == "" && f.healErr == "" && f.unobserved == ""
}

// targets lists a fault's concrete targets (a set is comma-separated).
func (f *faultRec) targets() []string { return strings.Split(f.target, ",") }

// linkScope is, for a fault on links, the instance its links are scoped to
// ("" when unscoped) and true; false for a fault on anything else.
func (f *faultRec) linkScope() (string, bool) {
	t := f.target
	if t == "" {
		t = f.scheduled
	}
	scope := ""
	for i, x := range strings.Split(t, ",") {
		if !strings.HasPrefix(x, "link:") {
			return "", false
		}
		_, s, _ := strings.Cut(x, "@")
		if i > 0 && s != scope {
			return "", false
		}
		scope = s
	}
	return scope, true
}

// sameGroup reports whether f and g are one group (MODEL §10): a declared
// group, or link faults of one type on links of the same instance scope
// whose windows overlap.
func sameGroup(f, g *faultRec) bool {
	if f == g {
		return false
	}
	if f.group != "" && f.group == g.group {
		return true
	}
	if f.typ != g.typ {
		return false
	}
	fs, fl := f.linkScope()
	gs, gl := g.linkScope()
	return fl && gl && fs == gs
}

// overlap reports whether the windows of two started faults overlap.
func overlap(f, g *faultRec) bool {
	if !f.started || !g.started {
		return false
	}
	fe, ge := f.end, g.end
	if !f.ended {
		fe = never
	}
	if !g.ended {
		ge = never
	}
	return f.start <= ge && g.start <= fe
}

func (c *Case) faultMark(e *history.Event) {
	f := c.faults[e.Fault]
	if f == nil {
		c.malformed("%s mark for %q, which the case did not schedule", e.F, e.Fault)
		return
	}
	switch e.F {
	case history.MarkFaultStart:
		if f.started {
			c.malformed("fault %s started twice", f.name)
			return
		}
		f.started, f.start, f.target = true, e.T, e.Target
		f.acqStart = c.live.acquisitions
		f.nextGrant = -1
		c.awaitGrant = append(c.awaitGrant, f)
		c.res.FaultsFired++
		c.res.Segments = append(c.res.Segments, Segment{Start: e.T})
		c.harness.faultStart(e.T)
		c.live.faultStart(f, e.T)
		c.faultEffect(f, e.T, true)
	case history.MarkFaultEnd:
		if !f.started || f.ended {
			c.malformed("fault %s healed without being in force", f.name)
			return
		}
		f.ended, f.end, f.healErr = true, e.T, e.Err
		f.acqEnd = c.live.acquisitions
		c.res.Segments = append(c.res.Segments, Segment{Start: e.T})
		c.harness.faultEnd(e.T)
		c.faultEffect(f, e.T, false)
		c.live.faultEnd(f, e.T)
	case history.MarkFaultError:
		f.errMsg = e.Err
		if f.errMsg == "" {
			f.errMsg = "no reason given"
		}
	case history.MarkFaultUnobserved:
		f.unobserved = e.Err
		if f.unobserved == "" {
			f.unobserved = "no reason given"
		}
	case history.MarkFaultIdle:
		f.idle = e.Err
		if f.idle == "" {
			f.idle = "nothing used its target while it was in force"
		}
	}
}

// faultEffect applies what a fault does to instances (MODEL §4): a kill
// makes its instances dead at its start, a pause pauses them for the
// window.
func (c *Case) faultEffect(f *faultRec, t int64, start bool) {
	if f.typ != "kill" && f.typ != "pause" {
		return
	}
	for _, target := range f.targets() {
		n, ok := strings.CutPrefix(target, "instance-")
		if !ok || !digits(n) {
			continue
		}
		in := c.instance("i" + n)
		switch {
		case f.typ == "kill" && start:
			c.die(in, t, true)
		case f.typ == "pause" && start:
			c.pause(in, t)
		case f.typ == "pause":
			c.resume(in, t)
		}
	}
}

// faultReasons lists why the faults make the case invalid (MODEL §10).
func (c *Case) faultReasons() []string {
	var out []string
	for _, f := range c.faultList {
		desc := fmt.Sprintf("fault %s (%s on %s)", f.name, f.typ, f.scheduled)
		switch {
		case f.errMsg != "":
			out = append(out, fmt.Sprintf("%s could not be applied: %s", desc, f.errMsg))
		case !f.started:
			out = append(out, desc+" never fired")
		case !f.ended && c.ended:
			out = append(out, desc+" never healed: the harness did not undo it, so what followed cannot be blamed on the lock")
		case f.healErr != "":
			out = append(out, fmt.Sprintf("%s could not be healed (%s): its effect may have outlasted its window, so what followed cannot be blamed on the lock", desc, f.healErr))
		case f.unobserved != "":
			out = append(out, fmt.Sprintf("%s was applied but its effect was not observed: %s", desc, f.unobserved))
		case f.idle != "" && !c.excused(f):
			out = append(out, fmt.Sprintf("%s did nothing the run could see: %s", desc, f.idle))
		}
	}
	return out
}

// excused reports whether an idle fault belongs to a group another member
// of which, in force at the same time, was observed (MODEL §10).
func (c *Case) excused(f *faultRec) bool {
	for _, g := range c.faultList {
		if sameGroup(f, g) && overlap(f, g) && g.observed() {
			return true
		}
	}
	return false
}
