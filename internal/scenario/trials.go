package scenario

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/workload"
)

// trialsDoc repeats a case: count runs, of which need must meet the
// expectation (default: all of them).
type trialsDoc struct {
	Count int `yaml:"count"`
	Need  int `yaml:"need"`
	// SideBySide runs up to this many trials at once on one cluster, each
	// with its own instances, keys and faults (a lane): trials then cost
	// their duration once per batch. A fault on a trial's own instances,
	// links or keys is copied into every lane; one on what the lanes share
	// (a server, a server's link, the leader) happens once, and every lane
	// meets it.
	SideBySide int `yaml:"side_by_side"`
	// Spread schedules each trial's faults at a point of the lock's
	// cycle drawn from the seed. Unset, only what the scenario leaves to
	// chance moves: faults aimed at a role, and every fault when the
	// workload is itself random; a fault on a named target against a
	// workload that is not random keeps the instant written. true moves
	// every fault (but one at 0, and one side-by-side lanes share); false
	// keeps the times as written (a replay of a schedule that really ran).
	Spread *bool `yaml:"spread"`
}

// expandTrials turns a case with trials into one case per trial.
func expandTrials(errs *Errors, i int, n *yaml.Node, c *Case) []*Case {
	c.Row, c.Trial, c.Trials, c.Need = c.Name, 1, 1, 1
	tn := valueOf(n, "trials")
	if tn == nil {
		for _, f := range c.Faults {
			if f.Trial > 1 {
				errs.add(f.line, fmt.Sprintf("cases[%d] (%s).faults (%s).trial", i, c.Name, f.Name), "trial %d: the case runs 1 trial (give it trials: {count: N})", f.Trial)
				return nil
			}
		}
		return []*Case{c}
	}
	var t trialsDoc
	if err := config.DecodeStrict(tn, &t); err != nil {
		errs.addErr(tn.Line, fmt.Sprintf("cases[%d] (%s).trials", i, c.Name), err)
		return nil
	}
	if t.Need == 0 {
		t.Need = t.Count
	}
	if t.Count < 1 || t.Count > 100 || t.Need < 1 || t.Need > t.Count {
		errs.add(tn.Line, fmt.Sprintf("cases[%d] (%s).trials", i, c.Name), "need 1 <= need <= count <= 100, got count %d need %d", t.Count, t.Need)
		return nil
	}
	for _, f := range c.Faults {
		if f.Trial > t.Count {
			errs.add(f.line, fmt.Sprintf("cases[%d] (%s).faults (%s).trial", i, c.Name, f.Name), "trial %d: the case runs %d trials", f.Trial, t.Count)
			return nil
		}
	}
	c.Fixed = t.Spread != nil && !*t.Spread
	c.SpreadAll = t.Spread != nil && *t.Spread
	if t.SideBySide > 1 {
		return sideBySide(errs, i, tn, c, t)
	}
	out := make([]*Case, t.Count)
	for k := range out {
		cp := *c
		if t.Count > 1 {
			cp.Name = fmt.Sprintf("%s.t%d", c.Name, k+1)
		}
		cp.Trial, cp.Trials, cp.Need = k+1, t.Count, t.Need
		cp.Faults = nil // each trial spreads its own
		for _, f := range c.Faults {
			if f.Trial != 0 && f.Trial != k+1 {
				continue // another trial's own fault
			}
			fc := *f
			cp.Faults = append(cp.Faults, &fc)
		}
		out[k] = &cp
	}
	return out
}

// MaxLanes bounds the trials run side by side.
const MaxLanes = 20

// sideBySide turns a case with trials into batches of at most
// t.SideBySide trials run at once: lane l of a batch has instances
// l*I+1..(l+1)*I, keys k(l*K)..k(l*K+K-1), and a copy of every fault,
// named <fault>@l<l+1>, aimed at its own instances, links and keys.
func sideBySide(errs *Errors, i int, tn *yaml.Node, c *Case, t trialsDoc) []*Case {
	field := fmt.Sprintf("cases[%d] (%s).trials.side_by_side", i, c.Name)
	switch {
	case t.SideBySide > MaxLanes:
		errs.add(tn.Line, field, "at most %d trials side by side, got %d", MaxLanes, t.SideBySide)
		return nil
	case c.nemesis != nil:
		errs.add(tn.Line, field, "a nemesis draws its own schedule; run its trials one after another")
		return nil
	}
	for _, f := range c.Faults {
		lanes := 0
		for _, tg := range f.Targets {
			if tg.Lane() {
				lanes++
			}
		}
		if lanes > 0 && lanes < len(f.Targets) {
			errs.add(tn.Line, field, "fault %s acts both on a trial's own instances or links and on what the trials share: split it in two", f.Name)
			return nil
		}
		if lanes == 0 && f.Trial != 0 {
			errs.add(f.line, field, "fault %s (trial %d) acts on what trials side by side share (%s): every trial of its batch would meet it; run the trials one after another", f.Name, f.Trial, f.Target())
			return nil
		}
	}
	I, K := c.Workload.Instances, c.Workload.Keys.Count
	var out []*Case
	for first := 1; first <= t.Count; first += t.SideBySide {
		lanes := min(t.SideBySide, t.Count-first+1)
		cp := *c
		cp.Name = fmt.Sprintf("%s.t%d-%d", c.Name, first, first+lanes-1)
		cp.Trial, cp.Trials, cp.Need, cp.Lanes, cp.LaneInstances = first, t.Count, t.Need, lanes, I
		cp.Workload.Instances = I * lanes
		cp.Faults = nil
		for _, f := range c.Faults {
			if !f.Targets[0].Lane() {
				cp.Faults = append(cp.Faults, f) // shared: once, met by every lane
			}
		}
		for l := 0; l < lanes; l++ {
			for _, f := range c.Faults {
				if !f.Targets[0].Lane() || (f.Trial != 0 && f.Trial != first+l) {
					continue
				}
				lf := *f
				lf.Name = fmt.Sprintf("%s@l%d", f.Name, l+1)
				lf.Lane = l + 1
				lf.Written = f.Target()
				lf.Targets = nil
				for _, tg := range f.Targets {
					lf.Targets = append(lf.Targets, laneOf(tg, l, I, K))
				}
				cp.Faults = append(cp.Faults, &lf)
			}
		}
		out = append(out, &cp)
	}
	return out
}

// laneOf moves a target into lane l: its instances and keys shifted.
func laneOf(t faults.Target, l, instances, keys int) faults.Target {
	shift := func(n history.Instance) history.Instance { return history.Instance(l*instances) + n }
	shiftKey := func(role string) string {
		if k, ok := strings.CutPrefix(role, faults.RoleHolderOf); ok {
			if n, ok := workload.ParseKey(k); ok {
				return faults.RoleHolderOf + workload.Key(l*keys+n)
			}
		}
		return role
	}
	switch {
	case t.Kind == faults.Instance && t.Instance != 0:
		return faults.InstanceTarget(shift(t.Instance))
	case t.Kind == faults.Instance:
		t.Name = shiftKey(t.Name)
	case t.Instance != 0: // a link of one instance
		return t.Scoped(shift(t.Instance))
	case t.Scope != "": // a link scoped to an instance role
		t.Scope = shiftKey(t.Scope)
	}
	return t
}

// spread schedules the faults of a trial of a row of several later than
// written by one offset drawn from the seed, the case and the lane, below
// the lock's own cycle (backends.Cycle) and half the slack each fault
// leaves after its window (the other half stays, so that what a fault does
// after it heals, a paused holder resuming, a server serving again, is
// still seen before the workload stops): a row's trials then meet their
// faults at points of the lock's renewal or lease spread over its cycle,
// independent draws rather than copies of one (a pause of 0.9 leases
// outlives the lease or not depending on where in the keep-alive period it
// begins). One offset for all of a trial's moved faults keeps them where
// they stand to one another (a cut that must still be in force when a
// kill comes).
//
// Only what the scenario leaves to chance moves (Case.SpreadAll moves
// more, Case.Fixed nothing): a trial's faults move when one of them is
// aimed at a role (the holder's pause meets the lease at every phase
// however the workload goes; the others keep their places to it: a clock
// jump 200 ms after the holder's kill), or when the workload is itself
// random (randomWorkload: it meets the faults at a point of chance
// anyway). A trial whose faults are all on named targets (an instance, a
// server, a link of one instance) against a workload that is not random
// keeps the instants written: a constant hold and a fault at 1 s on
// link:resource@instance-1 mean one particular write. Nor does a
// fault written at 0 move (it is in force from the case's first instant,
// which is what it is for), nor one the lanes of a batch share (met by
// all of them at once). Each fault not moved says why (Kept). Spreading
// again (a new seed) starts from the schedule as written.
func (c *Case) spread(seed int64) {
	for _, f := range c.Faults {
		f.At -= f.Spread
		f.Spread, f.Cycle, f.Kept = 0, 0, ""
	}
	if c.Trials < 2 {
		return
	}
	cycle := backends.Cycle(c.Backend, c.Workload.TTL.D())
	random := c.randomWorkload(cycle)
	groups := map[int][]*Fault{}
	var lanes []int
	for _, f := range c.Faults {
		switch {
		case c.Fixed:
			f.Kept = KeptFixed
		case cycle <= 0:
			f.Kept = KeptNoCycle
		case f.At == 0:
			f.Kept = KeptAtZero
		case c.Lanes > 1 && f.Lane == 0:
			f.Kept = KeptShared
		}
		if f.Kept != "" {
			continue
		}
		if groups[f.Lane] == nil {
			lanes = append(lanes, f.Lane)
		}
		groups[f.Lane] = append(groups[f.Lane], f)
	}
	for _, lane := range lanes {
		fs := groups[lane]
		move := c.SpreadAll || random
		for _, f := range fs {
			move = move || f.AimedAtRole()
		}
		if !move {
			for _, f := range fs {
				f.Kept = KeptInstant
			}
			continue
		}
		limit := cycle
		for _, f := range fs {
			limit = min(limit, (c.Workload.Duration.D()-f.At-f.For)/2)
		}
		if limit <= 0 {
			for _, f := range fs {
				f.Kept = KeptNoSlack
			}
			continue
		}
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d", c.Name, lane)
		off := time.Duration(rand.New(rand.NewPCG(uint64(seed), h.Sum64())).Int64N(int64(limit)))
		for _, f := range fs {
			f.Spread, f.Cycle = off, cycle
			f.At += off
		}
	}
}

// Why a trial's fault keeps the time written (Fault.Kept).
const (
	KeptFixed   = "trials: {spread: false}"
	KeptNoCycle = "the lock has no cycle to spread over"
	KeptAtZero  = "written at 0: in force from the first instant"
	KeptShared  = "shared by the batch's lanes: each meets it at its own point"
	KeptInstant = "on named targets against a workload that is not random, the instant written is the point (trials: {spread: true} moves it)"
	KeptNoSlack = "no slack after its window to move it into"
)

// AimedAtRole reports whether the fault is aimed at a role (the holder,
// a waiter, the leader, a connected member...), resolved when it starts.
func (f *Fault) AimedAtRole() bool {
	for _, t := range f.Targets {
		if t.IsRole() {
			return true
		}
	}
	return false
}

// ScheduleNote says, for a fault of a trial of several, where its trial's
// offset put it: how much later than written, over which cycle, or why it
// keeps the time written. "" for a case of one trial.
func (f *Fault) ScheduleNote(fmtDur func(time.Duration) string) string {
	switch {
	case f.Spread > 0 || f.Cycle > 0:
		return fmt.Sprintf("%s later than written: spread over the lock's %s cycle", fmtDur(f.Spread), fmtDur(f.Cycle))
	case f.Kept != "":
		return "at the time written: " + f.Kept
	}
	return ""
}

// randomWorkload reports whether the case's workload is itself random
// against the lock's cycle (workload.Chance): a hold that varies, a think
// that varies by a tenth of the cycle or more, or keys picked at random
// among several. Constant holds beside the default think (0-5 ms) are
// not: a fault at 1 s then meets the same point of the workload in every
// trial.
func (c *Case) randomWorkload(cycle time.Duration) bool {
	holds, think, keys := c.Workload.Chance()
	return holds || keys || think*10 >= cycle
}
