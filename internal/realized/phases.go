package realized

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// batch is one case the runner ran, as its history tells it: its meta,
// its start, and the phase each of its lanes' locks was in when each of
// its faults began (fault name -> lane -> phase).
type batch struct {
	meta   history.CaseMeta
	start  int64
	phases map[string]map[int]string
}

// clientState is one client's operation in flight.
type clientState struct {
	acquiring, holding, extending, releasing bool
}

// readBatches reads a history and returns its cases in order, with the
// phase of each lane's lock at each fault's start.
func readBatches(path string) ([]*batch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("realized schedules: %w", err)
	}
	defer f.Close()
	var (
		out   []*batch
		cur   *batch
		state map[history.Proc]*clientState
	)
	r := history.NewReader(f, path)
	for r.Next() {
		e := r.Event()
		if e.Type == history.Mark {
			switch e.F {
			case history.MarkCaseStart:
				cur = &batch{start: e.T, phases: map[string]map[int]string{}}
				if err := json.Unmarshal(e.Meta, &cur.meta); err != nil {
					return nil, fmt.Errorf("%s:%d: case-start meta: %w", path, r.Line(), err)
				}
				state = map[history.Proc]*clientState{}
				out = append(out, cur)
			case history.MarkFaultStart:
				if cur != nil {
					cur.phases[e.Fault] = cur.phasesAt(e, state)
				}
			case history.MarkCrash:
				if p, err := history.ParseProc(e.Proc); err == nil {
					for q := range state {
						if q.Instance == p.Instance {
							delete(state, q)
						}
					}
				}
			}
			continue
		}
		if cur == nil || e.Proc == "" {
			continue
		}
		p, err := history.ParseProc(e.Proc)
		if err != nil || !p.IsClient() {
			continue
		}
		s := state[p]
		if s == nil {
			s = &clientState{}
			state[p] = s
		}
		s.step(e)
	}
	if err := r.Err(); err != nil {
		return out, fmt.Errorf("realized schedules: %w", err)
	}
	return out, nil
}

// step moves a client's state by one of its events.
func (s *clientState) step(e *history.Event) {
	switch e.F {
	case history.OpAcquire:
		s.acquiring = e.Type == history.Invoke
		if e.Type == history.OK {
			s.holding = true
		}
	case history.OpExtend:
		s.extending = e.Type == history.Invoke
	case history.OpRelease:
		s.releasing = e.Type == history.Invoke
		if e.Type != history.Invoke {
			s.holding = false
		}
	case history.OpLost:
		s.holding, s.extending = false, false
	}
}

// phasesAt is each lane's phase when fault-start mark e was stamped: seen
// from the instance it hit when it hit one, else from the lane's clients.
func (b *batch) phasesAt(e *history.Event, state map[history.Proc]*clientState) map[int]string {
	lanes := max(1, b.meta.Lanes)
	li := b.meta.LaneInstances
	laneOf := func(n history.Instance) int {
		if b.meta.Lanes < 1 || li < 1 {
			return 1
		}
		return (int(n)-1)/li + 1
	}
	hit := map[history.Instance]bool{}
	for _, t := range strings.Split(e.Target, ",") {
		if n, err := history.ParseInstance(strings.TrimSpace(t)); err == nil {
			hit[n] = true
		}
	}
	out := map[int]string{}
	for l := 1; l <= lanes; l++ {
		var in []*clientState
		for p, s := range state {
			if laneOf(p.Instance) != l || (len(hit) > 0 && !hit[p.Instance]) {
				continue
			}
			in = append(in, s)
		}
		out[l] = phaseOf(in)
	}
	return out
}

// phaseOf is the phase of a set of clients: the first of extending,
// releasing, holding, waiting that one of them is in, else idle.
func phaseOf(cs []*clientState) string {
	for _, p := range []struct {
		name string
		in   func(*clientState) bool
	}{
		{PhaseExtending, func(s *clientState) bool { return s.extending }},
		{PhaseReleasing, func(s *clientState) bool { return s.releasing }},
		{PhaseHolding, func(s *clientState) bool { return s.holding }},
		{PhaseWaiting, func(s *clientState) bool { return s.acquiring }},
	} {
		for _, s := range cs {
			if p.in(s) {
				return p.name
			}
		}
	}
	return PhaseIdle
}
