package worker

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
)

// This file holds a job workload's executors at a phase of their attempt
// until a fault aimed at that phase has taken effect (the executor@<phase>
// role, checker/MODEL.md §20), so that each phase is met on purpose, not
// by luck: the coordinator arms the instances of a lane ("arm <id>
// <phase>"), the first client of theirs to reach the phase takes the arm,
// says so (an at-phase control mark, sent at once) and waits; the
// coordinator applies the fault to its instance and lets it go on
// ("release <id>"; a paused instance reads it when it resumes). An arm
// the coordinator withdraws ("disarm <id>", another instance was first)
// releases a client that took it meanwhile.

// MarkAtPhase is the control mark of a client that took an arm: Proc the
// client, Key its job, Attempt its attempt, Fault the arm's id, Observed
// the phase.
const MarkAtPhase = "at-phase"

// GateWait bounds how long a client waits at an armed phase for the
// fault: past it the client goes on, and the coordinator that never
// applied its fault has nothing to wait for.
const GateWait = 2 * time.Second

// gates are one worker's arms and the clients waiting at them.
type gates struct {
	mu      sync.Mutex
	armed   map[string]string        // id -> phase, not yet taken
	waiting map[string]chan struct{} // id -> closed to let the client go
	em      *emitter
}

func newGates(em *emitter) *gates {
	return &gates{armed: map[string]string{}, waiting: map[string]chan struct{}{}, em: em}
}

// command takes a line from the coordinator; false when it is none of
// the gates'.
func (g *gates) command(line string) bool {
	f := strings.Fields(line)
	if len(f) < 2 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case f[0] == "arm" && len(f) == 3:
		g.armed[f[1]] = f[2]
	case f[0] == "release" || f[0] == "disarm":
		delete(g.armed, f[1])
		if ch, ok := g.waiting[f[1]]; ok {
			close(ch)
			delete(g.waiting, f[1])
		}
	default:
		return false
	}
	return true
}

// at is called by a client reaching phase of attempt n of job: when an
// arm waits for that phase, the client takes it, says so and waits until
// it is let go (or GateWait passes, or ctx ends).
func (g *gates) at(ctx context.Context, phase, proc, job string, n int64) {
	if g == nil {
		return
	}
	g.mu.Lock()
	id := ""
	for k, p := range g.armed {
		if p == phase {
			id = k
			break
		}
	}
	if id == "" {
		g.mu.Unlock()
		return
	}
	delete(g.armed, id)
	ch := make(chan struct{})
	g.waiting[id] = ch
	g.mu.Unlock()
	g.em.emit(history.Event{Type: history.Mark, F: MarkAtPhase, Proc: proc, Key: job, Attempt: n, Fault: id, Observed: phase})
	t := time.NewTimer(GateWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		g.mu.Lock()
		delete(g.waiting, id)
		g.mu.Unlock()
	case <-ctx.Done():
	}
}
