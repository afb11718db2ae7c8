package checker

import (
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// faultRec follows one scheduled fault through its marks (MODEL §10).
type faultRec struct {
	name, typ, group string
	// effect is what the fault does to the processes it targets (the
	// meta's, history.FaultCore.EffectOf): kills, pauses, power losses
	// are told apart by it, never by the type's name.
	effect           history.FaultEffect
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
	// acting: a kill or pause of an instance acts on it (MODEL §4) unless
	// an unobserved or idle mark says its effect was not seen; settled:
	// whether it does is known (the events behind it were held back).
	acting, settled bool
	// late: it started at or after the case's stop (MODEL §10: too late).
	late bool
	// down are the keys held by its target instances' clients at its
	// start (MODEL §11, available: false); nil: every key.
	down map[string]bool
	// missed: aimed at the holder, it found its target holding nothing
	// (MODEL §10: missed its aim).
	missed bool
}

// observed reports whether f reached the workload, was healed and was seen
// to act (MODEL §10).
func (f *faultRec) observed() bool {
	return f.started && f.ended && !f.late && !f.missed && f.errMsg == "" && f.healErr == "" && f.unobserved == "" && f.idle == ""
}

// judgeable reports whether availability after f is judged (MODEL §11):
// not for a fault that makes the case invalid by itself.
func (f *faultRec) judgeable() bool {
	return f.started && f.ended && !f.late && !f.missed && f.errMsg == "" && f.healErr == "" && f.unobserved == ""
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
		f.late = c.stopped
		f.acqStart = c.live.acquisitions
		f.nextGrant = -1
		c.awaitGrant = append(c.awaitGrant, f)
		c.res.FaultsFired++
		c.fig.faultMark(e.T)
		c.fig.faultStart(f.name, e.Target, e.T)
		c.harness.faultStart(e.T)
		f.down = c.downKeys(f)
		f.missed = c.missedAim(f)
		c.jobs.faultStart(f)
		c.live.faultStart(f, e.T)
		c.faultEffect(f, e.T, true)
	case history.MarkFaultEnd:
		if !f.started || f.ended {
			c.malformed("fault %s healed without being in force", f.name)
			return
		}
		f.ended, f.end, f.healErr = true, e.T, e.Err
		if e.By != "" && f.healErr == "" {
			f.healErr = c.endedBy(f, e.By)
		}
		f.acqEnd = c.live.acquisitions
		c.fig.faultMark(e.T)
		c.fig.faultEnd(f.name, e.T)
		c.harness.faultEnd(e.T)
		c.faultEffect(f, e.T, false)
		c.live.faultEnd(f, e.T)
	case history.MarkFaultError:
		f.errMsg = e.Err
		if f.errMsg == "" {
			f.errMsg = "no reason given"
		}
	case history.MarkFaultUnobserved:
		if !f.started || f.ended {
			c.malformed("fault-unobserved mark of %s outside its window", f.name)
			return
		}
		f.unobserved = e.Err
		if f.unobserved == "" {
			f.unobserved = "no reason given"
		}
	case history.MarkFaultIdle:
		if !f.started || f.ended {
			c.malformed("fault-idle mark of %s outside its window", f.name)
			return
		}
		f.idle = e.Err
		if f.idle == "" {
			f.idle = "nothing used its target while it was in force"
		}
	}
}

// endedBy checks a heal's word that other faults (by: a comma-separated
// list) ended f's effect before its heal could undo it (MODEL §10): each
// must be a kill (or a power loss) of the case, of one of f's targets,
// begun inside f's window. It returns "" when they all are, else why the
// heal failed: a process gone that no fault of the case took away is the
// harness's failure, not the lock's (A8).
func (c *Case) endedBy(f *faultRec, by string) string {
	for _, name := range strings.Split(by, ",") {
		g := c.faults[name]
		switch {
		case g == nil:
			return fmt.Sprintf("its heal says %s ended its effect, but the case has no fault %s: its process went away with no fault of the case taking it", name, name)
		case !g.effect.Ends():
			return fmt.Sprintf("its heal says %s ended its effect, but %s is a %s, which ends no process", name, name, g.typ)
		case !g.started || g.start < f.start || g.start > f.end:
			return fmt.Sprintf("its heal says %s ended its effect, but %s did not begin inside its window: its process went away with no fault of the case taking it", name, name)
		case !shareTarget(f, g):
			return fmt.Sprintf("its heal says %s ended its effect, but %s killed %s, not %s", name, name, g.target, f.target)
		}
	}
	return ""
}

// shareTarget reports whether two started faults have a concrete target in
// common.
func shareTarget(f, g *faultRec) bool {
	for _, a := range f.targets() {
		for _, b := range g.targets() {
			if a == b {
				return true
			}
		}
	}
	return false
}

// faultEffect applies what a fault does to instances (MODEL §4): an acting
// kill makes its instances dead at its start, an acting pause pauses them
// for the window.
func (c *Case) faultEffect(f *faultRec, t int64, start bool) {
	if (f.effect != history.EffectKill && f.effect != history.EffectStop) || !f.acting {
		return
	}
	for _, target := range f.targets() {
		name, ok := instanceOf(target)
		if !ok {
			continue
		}
		in := c.instance(name)
		switch {
		case f.effect == history.EffectKill && start:
			c.die(in, t, true)
		case f.effect == history.EffectStop && start:
			c.pause(in, t)
		case f.effect == history.EffectStop:
			c.resume(in, t)
		}
	}
}

// downKeys are the keys a fault takes down (MODEL §11, available: false):
// those held by a client of one of its target instances at its start; nil
// (every key) for a fault with no instance target, or whose instances held
// nothing.
func (c *Case) downKeys(f *faultRec) map[string]bool {
	var keys map[string]bool
	for _, target := range f.targets() {
		name, ok := instanceOf(target)
		if !ok {
			continue
		}
		in := c.insts[name]
		if in == nil {
			continue
		}
		for _, cl := range in.clients {
			for _, h := range cl.holds {
				if keys == nil {
					keys = map[string]bool{}
				}
				keys[h.key] = true
			}
		}
	}
	return keys
}

// missedAim reports whether a fault aimed at the holder role found its
// target instances holding nothing (MODEL §10). A role written with a lane
// or a key (holder@l2, holder-of:k3) is the same role.
func (c *Case) missedAim(f *faultRec) bool {
	role, _, _ := strings.Cut(f.scheduled, "@")
	key, keyed := strings.CutPrefix(role, "holder-of:")
	if role != "holder" && !keyed {
		return false
	}
	for _, target := range f.targets() {
		name, ok := instanceOf(target)
		if !ok {
			return false // not an instance: the role named something else
		}
		if !keyed && c.jobs.inside(name) {
			return false // a job workload's holder: a client in a job attempt (MODEL §20)
		}
		if in := c.insts[name]; in != nil {
			for _, cl := range in.clients {
				for _, h := range cl.holds {
					if !keyed || h.key == key {
						return false
					}
				}
			}
		}
	}
	return true
}

// exposures counts the occasions on which the lock met a fault (MODEL
// §16): faults joined by a group and overlapping windows count once, when
// one of them reached the workload and was observed.
func (c *Case) exposures() int {
	parent := make([]int, len(c.faultList))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i, f := range c.faultList {
		for j := i + 1; j < len(c.faultList); j++ {
			if g := c.faultList[j]; sameGroup(f, g) && overlap(f, g) {
				parent[find(i)] = find(j)
			}
		}
	}
	seen := map[int]bool{}
	for i, f := range c.faultList {
		if f.observed() {
			seen[find(i)] = true
		}
	}
	return len(seen)
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
		case f.late:
			out = append(out, desc+" began after the workload had stopped: it never reached the lock")
		case f.missed:
			out = append(out, fmt.Sprintf("%s missed its aim: %s held no key of its role when the fault began", desc, f.target))
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
