package verdict

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// laneSplit sends the events of a batch of side-by-side trials to their
// lanes (history.CaseMeta.Lanes; MODEL §14): an event that names a key to
// the lane of its key, any other event of a client or an instance to the
// lane of its instance, a fault's marks to the lane of its fault, and the
// case's own marks to every lane, each lane judged as a trial of its own.
// Nothing that belongs nowhere is dropped: it makes the lanes it touches
// invalid.
type laneSplit struct {
	meta   history.CaseMeta
	faults map[string]int // fault name -> its lane (1-based)
}

func newLaneSplit(m history.CaseMeta) *laneSplit {
	s := &laneSplit{meta: m, faults: map[string]int{}}
	for _, f := range m.Faults {
		l := f.Lane
		if l == 0 {
			l = laneOfFaultName(f.Name) // a history from before lanes were recorded
		}
		s.faults[f.Name] = l
	}
	return s
}

// metas returns each lane's case meta: trial Trial+l, its own faults.
func (s *laneSplit) metas() []history.CaseMeta {
	var out []history.CaseMeta
	for l := 0; l < s.meta.Lanes; l++ {
		m := s.meta
		m.Lanes, m.LaneInstances = 0, 0
		m.Trial = s.meta.Trial + l
		m.Name = fmt.Sprintf("%s.t%d", m.Row, m.Trial)
		if m.Row == "" {
			m.Name = fmt.Sprintf("%s.l%d", s.meta.Name, l+1)
		}
		m.Clients = s.meta.Clients / s.meta.Lanes
		if j := s.meta.Jobs; j != nil {
			lj := *j
			lj.First = j.First + l*j.Count
			m.Jobs = &lj
		}
		m.Faults = nil
		for _, f := range s.meta.Faults {
			// Its own faults, and those the batch shares (a fault of no
			// lane: on a server, met by every lane's lock).
			if ln := s.faults[f.Name]; ln == l+1 || ln == 0 {
				f.Lane = 0
				m.Faults = append(m.Faults, f)
			}
		}
		out = append(out, m)
	}
	return out
}

// laneOfFaultName is the lane a fault's name ends with (@l<n>), 0 for none.
func laneOfFaultName(name string) int {
	i := strings.LastIndex(name, "@l")
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(name[i+2:])
	if err != nil || n < 1 || name[i+2:] != strconv.Itoa(n) {
		return 0
	}
	return n
}

// delivery is what one lane gets of an event: the event (nil: none), and
// why it makes the lane invalid ("": it does not).
type delivery struct {
	lane  int // 0-based
	event *history.Event
	stray string
}

// route says where an event goes.
func (s *laneSplit) route(e *history.Event) []delivery {
	all := func(ev *history.Event, stray string) []delivery {
		out := make([]delivery, s.meta.Lanes)
		for i := range out {
			out[i] = delivery{lane: i, event: ev, stray: stray}
		}
		return out
	}
	if e.Type == history.Mark {
		switch e.F {
		case history.MarkFaultStart, history.MarkFaultEnd, history.MarkFaultError, history.MarkFaultUnobserved, history.MarkFaultIdle:
			if l := s.faults[e.Fault]; l >= 1 && l <= s.meta.Lanes {
				return []delivery{{lane: l - 1, event: e}}
			}
			return all(e, "") // a shared fault, met by every lane (or one it names no fault of: malformed)
		case history.MarkStoreTotals:
			return s.totals(e)
		case history.MarkCrash, history.MarkResRead, history.MarkResWrite, history.MarkSinkEffect:
			return s.byProc(e)
		}
		return all(e, "")
	}
	return s.byProc(e)
}

// byProc routes an event of a client or an instance: to the lane of its
// key when it names one, else to the lane of its instance.
func (s *laneSplit) byProc(e *history.Event) []delivery {
	own := s.laneOfProc(e.Proc)
	if e.Key == "" {
		if own < 0 {
			return s.everyLane(fmt.Sprintf("an event of %s, which belongs to no lane of the batch", e.Proc))
		}
		return []delivery{{lane: own, event: e}}
	}
	kl := s.laneOfKey(e.Key)
	switch {
	case kl >= 0 && kl == own:
		return []delivery{{lane: own, event: e}}
	case kl >= 0 && own >= 0:
		why := fmt.Sprintf("client %s of lane %d used key %s of lane %d: the trials were not apart", e.Proc, own+1, e.Key, kl+1)
		return []delivery{{lane: kl, event: e, stray: why}, {lane: own, stray: why}}
	case kl >= 0:
		return []delivery{{lane: kl, event: e, stray: fmt.Sprintf("%s, which belongs to no lane of the batch, used key %s", e.Proc, e.Key)}}
	case own >= 0:
		return []delivery{{lane: own, event: e, stray: fmt.Sprintf("client %s used key %s, which belongs to no lane of the batch", e.Proc, e.Key)}}
	}
	return s.everyLane(fmt.Sprintf("an event of %s on key %s, neither of which belongs to a lane of the batch", e.Proc, e.Key))
}

func (s *laneSplit) everyLane(why string) []delivery {
	out := make([]delivery, s.meta.Lanes)
	for i := range out {
		out[i] = delivery{lane: i, stray: why}
	}
	return out
}

// laneOfProc maps "i7c0" or "i7" to its instance's lane (0-based; -1:
// none).
func (s *laneSplit) laneOfProc(proc string) int {
	n, ok := instanceNumber(proc)
	if !ok || s.meta.LaneInstances < 1 {
		return -1
	}
	l := (n - 1) / s.meta.LaneInstances
	if l >= s.meta.Lanes {
		return -1
	}
	return l
}

// laneOfKey maps "k5" to its lane (0-based; -1: none), and a job "j70" of
// a job workload to the lane of its job (MODEL §14: lane l has jobs
// j(l·N) .. j(l·N+N-1)).
func (s *laneSplit) laneOfKey(key string) int {
	if j := s.meta.Jobs; j != nil && strings.HasPrefix(key, "j") {
		n, err := strconv.Atoi(key[1:])
		if err != nil || n < j.First || j.Count < 1 || key[1:] != strconv.Itoa(n) {
			return -1
		}
		if l := (n - j.First) / j.Count; l < s.meta.Lanes {
			return l
		}
		return -1
	}
	n, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
	if err != nil || !strings.HasPrefix(key, "k") || n < 0 || s.meta.Keys < 1 || key[1:] != strconv.Itoa(n) {
		return -1
	}
	l := n / s.meta.Keys
	if l >= s.meta.Lanes {
		return -1
	}
	return l
}

// totals splits a store-totals mark: each lane sees its own keys; a key
// of no lane makes every lane invalid.
func (s *laneSplit) totals(e *history.Event) []delivery {
	var totals map[string]int64
	if len(e.Meta) == 0 || json.Unmarshal(e.Meta, &totals) != nil {
		out := make([]delivery, s.meta.Lanes)
		for i := range out {
			out[i] = delivery{lane: i, event: e}
		}
		return out
	}
	own := make([]map[string]int64, s.meta.Lanes)
	for i := range own {
		own[i] = map[string]int64{}
	}
	stray := ""
	for key, v := range totals {
		if l := s.laneOfKey(key); l >= 0 {
			own[l][key] = v
		} else {
			stray = fmt.Sprintf("the store's totals name key %s, which belongs to no lane of the batch", key)
		}
	}
	out := make([]delivery, s.meta.Lanes)
	for i := range out {
		cp := *e
		cp.Meta, _ = json.Marshal(own[i])
		out[i] = delivery{lane: i, event: &cp, stray: stray}
	}
	return out
}

// instanceNumber is N of a proc "iN" or "iNcM".
func instanceNumber(proc string) (int, bool) {
	rest, ok := strings.CutPrefix(proc, "i")
	if !ok {
		return 0, false
	}
	if i := strings.IndexByte(rest, 'c'); i >= 0 {
		rest = rest[:i]
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || rest != strconv.Itoa(n) {
		return 0, false
	}
	return n, true
}

// instanceOfProc is the instance "iN" of a proc "iN" or "iNcM".
func instanceOfProc(proc string) string {
	if i := strings.IndexByte(proc, 'c'); i > 0 {
		return proc[:i]
	}
	return proc
}
