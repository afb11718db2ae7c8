package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/internal/wait"
)

// runFault waits for the fault's time, applies it, keeps it for its window,
// checks what it did, heals it, and records what really happened. choice
// seeds the pick among several candidates for a role target.
func (cr *caseRun) runFault(ctx context.Context, f *scenario.Fault, k int, choice uint64) {
	rec := layout.Fault{Case: cr.c.Name, FaultCore: f.Core(), AtNs: int64(f.At), ForNs: int64(f.For),
		SpreadNs: int64(f.Spread), CycleNs: int64(f.Cycle), Lane: f.Lane, Options: f.Options, Written: f.Written}
	defer cr.r.recordFault(&rec)
	fail := func(err error) {
		cr.dirty.Store(true) // whatever half of it was applied may linger
		rec.Error = err.Error()
		cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultError, Fault: f.Name, Target: rec.Target, Err: rec.Error})
	}
	due := time.Duration(cr.start + int64(f.At) - monoclock.Since(cr.r.base))
	if !wait.Sleep(ctx, due) {
		fail(errors.New("the case ended before the fault's time"))
		return
	}
	var (
		targets []faults.Target
		eff     *faults.Effect
		src     int
		t0      int64
	)
	// A fault whose target was resolved from a role may find, once it took
	// effect, that the target no longer plays it (a holder that left its
	// critical section before its pause): the fault undoes itself
	// (faults.RoleLeftError) and the role is resolved again, a few times
	// at most (a case whose holders always get away is invalid, not ✓).
	for attempt := 1; ; attempt++ {
		var err error
		if targets, err = cr.resolve(ctx, f, choice); err != nil {
			fail(err)
			return
		}
		rec.Resolved = faults.Targets(targets)
		env := &faultEnv{cr: cr, fault: f.Name}
		for _, t := range targets {
			if err := env.healthy(t); err != nil {
				fail(fmt.Errorf("target not healthy before injection: %w", err))
				return
			}
		}
		// The fault-start mark carries the instant the fault began to be
		// applied (a kill ends a hold then, not when the process is
		// reaped), so the merger is held at that instant until the mark is
		// pushed.
		src = -(cr.idx*1000 + 500 + k)
		t0 = cr.r.m.addSource(src)
		eff, err = startAll(context.WithoutCancel(ctx), f.Fault, env, targets)
		if err == nil {
			if attempt > 1 {
				rec.Observed = append(rec.Observed, fmt.Sprintf("the %s was resolved %d times: %d had left the role when the fault took effect", targets[0].From, attempt, attempt-1))
			}
			break
		}
		cr.r.m.removeSource(src)
		var left *faults.RoleLeftError
		if !errors.As(err, &left) {
			fail(err)
			return
		}
		if attempt == maxRoleTries {
			fail(fmt.Errorf("%s, %d times: the %s could not be hit while it played the role", left.Msg, attempt, targets[0].From))
			return
		}
		fmt.Fprintf(cr.r.log, "  fault %s: %s; undone, resolving the %s again\n", f.Name, left.Msg, targets[0].From)
	}
	target := rec.Resolved
	rec.Applied, rec.StartNs = true, t0
	rec.Emulated = eff.Emulated
	if eff.Seen != "" {
		rec.Observed = append(rec.Observed, eff.Seen)
	}
	cr.r.m.push(src, &history.Event{T: t0, Type: history.Mark, F: history.MarkFaultStart, Fault: f.Name, Target: target, Observed: eff.Seen})
	cr.r.m.removeSource(src)
	cr.r.fault.Store(fmt.Sprintf("%s (%s %s)", f.Name, f.Type, target))
	fmt.Fprintf(cr.r.log, "  fault %s: %s on %s for %s: %s\n", f.Name, f.Type, target, f.For, eff.Seen)
	wait.Sleep(ctx, f.For)
	hctx, cancel := context.WithTimeout(context.Background(), healWait)
	defer cancel()
	if eff.Check != nil {
		obs, err := eff.Check(hctx)
		switch {
		case faults.IsIdle(err):
			rec.Idle = err.Error()
			fmt.Fprintf(cr.r.log, "  fault %s: idle: %v\n", f.Name, err)
			cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultIdle, Fault: f.Name, Target: target, Err: rec.Idle})
		case err != nil:
			rec.Unobserved = err.Error()
			fmt.Fprintf(cr.r.log, "  fault %s: effect not observed: %v\n", f.Name, err)
			cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultUnobserved, Fault: f.Name, Target: target, Err: rec.Unobserved})
		case obs != "":
			rec.Observed = append(rec.Observed, obs)
		}
	}
	healed, err := eff.Heal(hctx)
	if info, _ := faults.Lookup(f.Type); info.Lasting && targets[0].Kind == faults.Server {
		cr.dirty.Store(true) // a restarted, promoted or re-clocked server
	}
	if err != nil {
		cr.dirty.Store(true)
		rec.HealError = err.Error()
		fmt.Fprintf(cr.r.log, "  fault %s: heal: %v\n", f.Name, err)
	} else if healed != "" {
		rec.Observed = append(rec.Observed, healed)
	}
	rec.EndNs = monoclock.Since(cr.r.base)
	cr.healed(rec.EndNs)
	cr.r.fault.Store("")
	// A heal that found the effect already ended by a kill of the case
	// names it (checker/MODEL.md §10: the checker holds it to being one).
	cr.r.m.emit(history.Event{Type: history.Mark, F: history.MarkFaultEnd, Fault: f.Name, Target: target, Err: rec.HealError, Observed: healed, By: eff.EndedBy})
}

// healWait bounds a fault's check and heal.
const healWait = 30 * time.Second

// maxRoleTries bounds how often a fault resolves its role again because
// the target it hit had left the role when the fault took effect.
const maxRoleTries = 10

// resolve is the concrete targets of a fault now: its role resolved (or
// the role its set of links is scoped to), or its targets as named.
func (cr *caseRun) resolve(ctx context.Context, f *scenario.Fault, choice uint64) ([]faults.Target, error) {
	first := f.Targets[0]
	switch {
	case first.Kind == faults.Link && first.ScopeRole():
		// Links scoped to an instance role (link:etcd-*@holder): the
		// role is resolved once, for every link of the set.
		return cr.resolveScope(ctx, f.Targets, f.Lane, choice)
	case first.IsRole():
		t, err := cr.resolveRole(ctx, first, f.Lane, choice)
		if err != nil {
			return nil, err
		}
		return []faults.Target{t}, nil
	}
	return append([]faults.Target(nil), f.Targets...), nil
}

// startAll applies a fault to each of its targets (one, or a set) and
// returns one Effect for all of them (checker/MODEL.md §10): seen when
// every target's effect was, observed while in force when at least one
// target was observed and none failed (an idle target among observed ones
// is named, not fatal), idle when every target was, healed when every
// target was. A target that cannot be applied undoes the ones before it.
func startAll(ctx context.Context, f faults.Fault, env faults.Env, targets []faults.Target) (*faults.Effect, error) {
	if len(targets) == 1 {
		return f.Start(ctx, env, targets[0])
	}
	var effs []*faults.Effect
	// The members heal at once: a member of a quorum restarted alone (a
	// power loss or a kill of a whole etcd cluster) would wait for the
	// others to answer before it does.
	var all *faults.Effect
	healAll := func(ctx context.Context) (string, error) {
		errs := make([]error, len(effs))
		out := make([]string, len(effs))
		var wg sync.WaitGroup
		for i, e := range effs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i], errs[i] = e.Heal(ctx)
			}()
		}
		wg.Wait()
		var seen, by []string
		for i, s := range out {
			if s != "" {
				seen = append(seen, s)
			}
			if b := effs[i].EndedBy; b != "" && !slices.Contains(by, b) {
				by = append(by, b)
			}
		}
		if all != nil {
			all.EndedBy = strings.Join(by, ",")
		}
		return strings.Join(seen, "; "), errors.Join(errs...)
	}
	var seen []string
	emulated := ""
	for _, t := range targets {
		e, err := f.Start(ctx, env, t)
		if err != nil {
			_, herr := healAll(ctx)
			return nil, errors.Join(fmt.Errorf("%s: %w", t, err), herr)
		}
		effs = append(effs, e)
		seen = append(seen, e.Seen)
		if emulated == "" {
			emulated = e.Emulated
		}
	}
	check := func(ctx context.Context) (string, error) {
		var observed, idle, failed []string
		for i, e := range effs {
			if e.Check == nil {
				observed = append(observed, targets[i].String())
				continue
			}
			s, err := e.Check(ctx)
			switch {
			case faults.IsIdle(err):
				idle = append(idle, targets[i].String())
			case err != nil:
				failed = append(failed, fmt.Sprintf("%s: %v", targets[i], err))
			default:
				observed = append(observed, fmt.Sprintf("%s: %s", targets[i], s))
			}
		}
		switch {
		case len(failed) > 0:
			return "", errors.New(strings.Join(failed, "; "))
		case len(observed) == 0:
			return "", &faults.IdleError{Msg: fmt.Sprintf("nothing used any of %s while the fault was in force", strings.ReplaceAll(faults.Targets(targets), ",", ", "))}
		}
		out := strings.Join(observed, "; ")
		if len(idle) > 0 {
			out += fmt.Sprintf("; idle (nothing used them): %s", strings.Join(idle, ", "))
		}
		return out, nil
	}
	all = &faults.Effect{Seen: strings.Join(seen, "; "), Check: check, Heal: healAll, Emulated: emulated}
	return all, nil
}

func (r *run) recordFault(rec *layout.Fault) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if err := r.faults.Encode(rec); err != nil {
		fmt.Fprintf(r.log, "write faults.jsonl: %v\n", err)
	}
}
