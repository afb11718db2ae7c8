package runner

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
)

// This file aims a fault at a phase of a job attempt (the executor@<phase>
// role, checker/MODEL.md §20): the coordinator arms the instances of the
// fault's lane, the first client to reach the phase waits there
// (internal/worker's gates), its instance is the fault's target, and once
// the fault has taken effect the client is let go.

// phaseHit is a client that took an arm: it waits at the phase.
type phaseHit struct {
	id      string // the arm it took
	inst    history.Instance
	proc    string
	job     string
	attempt int64
	phase   string
	at      time.Time
}

// gateState is a case's arms in flight: who waits for which arm's hit,
// and which client each fault holds.
type gateState struct {
	wait map[string]chan phaseHit // arm id -> its resolver
	held map[string]phaseHit      // fault name -> the client it holds
	n    int                      // arms made: each id is new
}

// send writes a line to a worker's stdin, one writer at a time.
func (w *workerProc) send(line string) error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	_, err := io.WriteString(w.stdin, line+"\n")
	return err
}

// resolvePhase arms the live instances of the fault's lane for phase and
// returns the instance of the first client to reach it, held there until
// releaseGate.
func (cr *caseRun) resolvePhase(ctx context.Context, role faults.Target, phase string, lane int, fault string) (faults.Target, error) {
	cr.liveMu.Lock()
	cr.gates.n++
	id := fmt.Sprintf("%s#%d", fault, cr.gates.n)
	ch := make(chan phaseHit, 64)
	cr.gates.wait[id] = ch
	cr.liveMu.Unlock()
	defer func() {
		cr.liveMu.Lock()
		delete(cr.gates.wait, id)
		cr.liveMu.Unlock()
	}()
	var armed []*workerProc
	for _, w := range cr.sortedWorkers() {
		if (lane > 0 && cr.laneOf(w.n) != lane) || !w.proc.Alive() {
			continue
		}
		if err := w.send("arm " + id + " " + phase); err == nil {
			armed = append(armed, w)
		}
	}
	if len(armed) == 0 {
		return faults.Target{}, fmt.Errorf("role %s: no live instance to aim at", role)
	}
	disarm := func(except history.Instance) {
		for _, w := range armed {
			if w.n != except && w.proc.Alive() {
				_ = w.send("disarm " + id) // one gone has nothing to disarm
			}
		}
	}
	select {
	case h := <-ch:
		disarm(h.inst)
		cr.liveMu.Lock()
		cr.gates.held[fault] = h
		cr.liveMu.Unlock()
		t := faults.InstanceTarget(h.inst)
		t.From = role.String()
		return t, nil
	case <-ctx.Done():
		disarm(0)
		return faults.Target{}, fmt.Errorf("role %s: no client reached %s before the case ended", role, phase)
	}
}

// atPhase takes a worker's at-phase mark: the client is the hit of the arm
// it took, or, when nobody waits for that arm any more, it is let go.
func (cr *caseRun) atPhase(w *workerProc, e *history.Event) {
	cr.liveMu.Lock()
	ch := cr.gates.wait[e.Fault]
	cr.liveMu.Unlock()
	h := phaseHit{id: e.Fault, inst: w.n, proc: e.Proc, job: e.Key, attempt: e.Attempt, phase: e.Observed, at: time.Now()}
	select {
	case ch <- h:
		return
	default:
	}
	_ = w.send("release " + e.Fault)
}

// releaseGate lets go the client a fault held at its phase, once the
// fault has taken effect (or failed to), and says whom it met; "" for a
// fault that held none.
func (cr *caseRun) releaseGate(fault string) string {
	cr.liveMu.Lock()
	h, ok := cr.gates.held[fault]
	delete(cr.gates.held, fault)
	cr.liveMu.Unlock()
	if !ok {
		return ""
	}
	if w := cr.workers[h.inst]; w != nil && w.proc.Alive() {
		_ = w.send("release " + h.id) // a worker the fault killed has nothing to release
	}
	return fmt.Sprintf("met %s at %s of %s (attempt %d), held there %s until the fault took effect",
		h.proc, h.phase, h.job, h.attempt, time.Since(h.at).Round(time.Millisecond))
}
