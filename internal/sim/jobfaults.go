package sim

import (
	"fmt"
	"strconv"
)

// This file is a simulated job case's faults and the coordinator's reads
// of the sink (jobsim.go).

// fireFault is a fault's scheduled time: one aimed at a phase arms its
// lane's instances; any other resolves and starts.
func (jc *jobCase) fireFault(f *jfault) {
	if jc.w.now >= jc.stop {
		jc.faultError(f, "the case ended before the fault's time")
		return
	}
	if f.aimed {
		f.armed = true
		return
	}
	var in *jinst
	if n, err := strconv.Atoi(trimPrefix(f.target, "instance-")); err == nil {
		in = jc.insts[n-1]
	}
	if len(f.target) > len("link:postgres-1@instance-") && f.target[:len("link:postgres-1@instance-")] == "link:postgres-1@instance-" {
		n, _ := strconv.Atoi(f.target[len("link:postgres-1@instance-"):])
		f.inst = n
	}
	jc.startFault(f, in, f.target)
}

func trimPrefix(s, p string) string {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return ""
}

// startFault applies a fault: its start mark, and what it does to an
// instance; its heal after its window.
func (jc *jobCase) startFault(f *jfault, in *jinst, target string) {
	now := jc.w.now
	if in != nil && in.dead {
		jc.faultError(f, "no such process") // its instance is gone
		return
	}
	f.started, f.start, f.resolved = true, now, target
	if in != nil {
		f.inst = in.n
	}
	jc.emit(now, newObj(nil).Int("t", now).Str("type", "mark").Str("f", "fault-start").Str("fault", f.name).Str("target", target).End())
	end := now + f.dur
	switch {
	case f.typ == "kill" && in != nil:
		in.dead, in.deathT = true, now
		if f.mark {
			// A kill marked unobserved does not act (MODEL §4): in the
			// record the instance dies at its crash mark.
			in.deathT = now + 1e6
		}
		for _, c := range jc.clients {
			if a := c.cur; c.inst == in && a != nil && jc.st.queue && jc.st.visibility == 0 && jc.takenBy[a.job] == a {
				delete(jc.taken, a.job) // its transaction rolled back with its connection
			}
		}
		jc.at(now+1e6, nil, func() {
			jc.emit(jc.w.now, newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "crash").Str("proc", fmt.Sprintf("i%d", in.n)).Str("err", "signal: killed").End())
		})
		end = now + 2e6
	case f.typ == "pause" && in != nil:
		in.pausedFrom, in.pausedTo = now, end
	}
	if f.mark {
		jc.at(now+f.dur/2+1, nil, func() { jc.unobserved(f) })
	}
	jc.at(end, nil, func() {
		if f.end == 0 {
			jc.heal(f)
		}
	})
}

// unobserved marks, once, inside its window, a fault whose effect the
// harness did not see.
func (jc *jobCase) unobserved(f *jfault) {
	if f.marked || f.end > 0 {
		return
	}
	f.marked = true
	jc.emit(jc.w.now, newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "fault-unobserved").Str("fault", f.name).Str("target", f.resolved).Str("err", "no effect seen").End())
}

// heal ends a fault's window now.
func (jc *jobCase) heal(f *jfault) {
	if f.mark {
		jc.unobserved(f)
	}
	f.end = jc.w.now
	if f.typ == "pause" && f.inst > 0 {
		in := jc.insts[f.inst-1]
		in.pausedTo = min(in.pausedTo, f.end)
	}
	jc.emit(jc.w.now, newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "fault-end").Str("fault", f.name).Str("target", f.resolved).End())
}

// faultError marks a fault that could not be applied.
func (jc *jobCase) faultError(f *jfault, why string) {
	jc.emit(jc.w.now, newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "fault-error").Str("fault", f.name).Str("target", f.target).Str("err", why).End())
}

// readSink copies the committed effects not yet read into sink-effect
// marks; with a sink error, the records committed after the cut are never
// read.
func (jc *jobCase) readSink() {
	for _, cm := range jc.commits {
		if cm.read >= 0 || cm.t >= jc.w.now || (jc.sinkError && cm.t >= jc.sinkCut) {
			continue
		}
		jc.w.now++
		cm.read = jc.w.now
		a := cm.a
		o := newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "sink-effect").Str("proc", a.proc).Str("key", a.job).
			Uint("token", a.token).Int("attempt", a.n).Str("outcome", cm.outcome)
		jc.emit(jc.w.now, o.End())
	}
}
