package checker

import (
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// This file reads a job workload's record (MODEL §20): the attempts the
// executors recorded, the effects the sink recorded on its own side, and
// what each fault met; jobfigures.go judges them.

type attemptKey struct {
	proc, job string
	n         int64
}

// attempt is one job attempt (MODEL §20).
type attempt struct {
	attemptKey
	inst           string
	start, end     int64 // end -1: open
	endType        history.Type
	effInv, effEnd int64 // -1: none
	effOK          bool  // the effect's completion was ok: the sink said applied
	lostBefore     bool  // the client was told its lease was lost before the effect
}

type sinkRec struct {
	key     attemptKey
	token   uint64
	outcome string
	t       int64
}

// try is one client's asking for one period of a periodic job (MODEL
// §20): its first invoke on the job (an acquire of its lock, or an
// attempt), its last completion, and whether it made an attempt.
type try struct {
	proc, job  string
	start, end int64 // end -1: open
	attempted  bool
}

type jobCheck struct {
	meta     *history.JobsMeta
	attempts map[attemptKey]*attempt
	order    []*attempt
	open     map[string]*attempt // a client's attempt in flight
	lostAt   map[string]int64    // when a client was told it lost a job's lease (latest), by "proc\x00job"
	sink     []sinkRec
	touch    map[*faultRec][]touch
	tries    map[string]*try // by "proc\x00job"
	tryOrder []*try
	// malformed is the case's: a job event outside the record's rules
	// makes the history malformed (MODEL §3, §20).
	malformed func(format string, args ...any)
	// dead reports whether an instance has died (its attempt in flight
	// ended then, MODEL §20).
	dead func(inst string) bool
}

// touch is an attempt a fault met at its start, and the phase it was in.
type touch struct {
	a     *attempt
	phase string
}

func (j *jobCheck) init(meta history.CaseMeta, malformed func(format string, args ...any), dead func(inst string) bool) {
	j.malformed, j.dead = malformed, dead
	j.meta = meta.Jobs
	j.attempts = map[attemptKey]*attempt{}
	j.open = map[string]*attempt{}
	j.lostAt = map[string]int64{}
	j.touch = map[*faultRec][]touch{}
	j.tries = map[string]*try{}
}

func (j *jobCheck) on() bool { return j.meta != nil }

// jobNumber is n of a job key j<n> of the case (First <= n < First+Count),
// or -1.
func (j *jobCheck) jobNumber(key string) int {
	s, ok := strings.CutPrefix(key, "j")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < j.meta.First || n >= j.meta.First+j.meta.Count || strconv.Itoa(n) != s {
		return -1
	}
	return n
}

// due is when job n falls due.
func (j *jobCheck) due(start int64, n int) int64 {
	return start + int64(n-j.meta.First)*j.meta.EveryNs
}

// op takes an operation of a live client: a job or effect operation, a
// lost signal, and (for a periodic job's tries) an acquire of a job's
// lock.
func (j *jobCheck) op(e *history.Event) {
	if !j.on() {
		return
	}
	inst, _, ok := parseProc(e.Proc)
	if !ok {
		return
	}
	switch e.F {
	case history.OpLost:
		j.lostAt[e.Proc+"\x00"+e.Key] = e.T
		return
	case history.OpAcquire:
		if j.meta.Periodic && j.jobNumber(e.Key) >= 0 {
			j.tryOp(e)
		}
		return
	case history.OpJob, history.OpEffect:
	default:
		return
	}
	if j.jobNumber(e.Key) < 0 {
		j.malformed("%s %s of %q: not a job of the case (j%d .. j%d)", e.Type, e.F, e.Key, j.meta.First, j.meta.First+j.meta.Count-1)
		return
	}
	k := attemptKey{e.Proc, e.Key, e.Attempt}
	a := j.open[e.Proc]
	if e.F == history.OpJob && e.Type == history.Invoke {
		switch {
		case a != nil:
			j.malformed("%s began attempt %d of %s while its attempt %d of %s was in flight", e.Proc, e.Attempt, e.Key, a.n, a.job)
			return
		case j.attempts[k] != nil:
			j.malformed("%s began attempt %d of %s twice", e.Proc, e.Attempt, e.Key)
			return
		}
		a = &attempt{attemptKey: k, inst: inst, start: e.T, end: -1, effInv: -1, effEnd: -1}
		j.attempts[k], j.open[e.Proc] = a, a
		j.order = append(j.order, a)
		if j.meta.Periodic {
			j.tryOp(e).attempted = true
		}
		return
	}
	if a == nil || a.attemptKey != k {
		j.malformed("%s %s of %s (attempt %d) by %s: no such attempt in flight", e.Type, e.F, e.Key, e.Attempt, e.Proc)
		return
	}
	switch {
	case e.F == history.OpJob:
		a.end, a.endType = e.T, e.Type
		delete(j.open, e.Proc)
		if j.meta.Periodic {
			j.tryOp(e)
		}
	case e.Type == history.Invoke:
		if a.effInv >= 0 {
			j.malformed("%s sent attempt %d of %s's effect twice", e.Proc, e.Attempt, e.Key)
			return
		}
		a.effInv = e.T
		if t, ok := j.lostAt[e.Proc+"\x00"+e.Key]; ok && t >= a.start {
			a.lostBefore = true
		}
	default:
		a.effEnd, a.effOK = e.T, e.Type == history.OK
	}
}

// tryOp notes an invoke or a completion of a client's try of a period.
func (j *jobCheck) tryOp(e *history.Event) *try {
	k := e.Proc + "\x00" + e.Key
	t := j.tries[k]
	if t == nil {
		t = &try{proc: e.Proc, job: e.Key, start: e.T, end: -1}
		j.tries[k] = t
		j.tryOrder = append(j.tryOrder, t)
	}
	if e.Type == history.Invoke {
		t.end = -1 // asking again: open until this answer
	} else {
		t.end = e.T
	}
	return t
}

// sinkMark takes the sink's record of an effect.
func (j *jobCheck) sinkMark(e *history.Event) {
	if !j.on() || e.F != history.MarkSinkEffect {
		return
	}
	if j.jobNumber(e.Key) < 0 {
		j.malformed("sink-effect of %q: not a job of the case", e.Key)
		return
	}
	j.sink = append(j.sink, sinkRec{key: attemptKey{e.Proc, e.Key, e.Attempt}, token: e.Token, outcome: e.Outcome, t: e.T})
}

// phaseOf is the phase an attempt is in now (MODEL §20).
func phaseOf(a *attempt) string {
	switch {
	case a.effEnd >= 0:
		return PhaseAfter
	case a.effInv >= 0:
		return PhaseDuring
	}
	return PhaseBefore
}

// faultInstances are the instances a fault acts on — an instance, or a
// link scoped to one — or nil for a fault on no instance (a server, a
// link every instance shares).
func faultInstances(f *faultRec) map[string]bool {
	insts := map[string]bool{}
	for _, t := range f.targets() {
		if link, ok := strings.CutPrefix(t, "link:"); ok {
			_, t, _ = strings.Cut(link, "@")
		}
		name, ok := instanceOf(t)
		if !ok {
			return nil
		}
		insts[name] = true
	}
	return insts
}

// faultStart notes the attempts a fault meets at its start: those of its
// target instances' clients, or every one in flight for a fault on no
// instance (MODEL §20).
func (j *jobCheck) faultStart(f *faultRec) {
	if !j.on() {
		return
	}
	insts := faultInstances(f)
	for _, a := range j.open {
		if (insts != nil && !insts[a.inst]) || j.dead(a.inst) {
			continue // not its target, or ended by its instance's death
		}
		j.touch[f] = append(j.touch[f], touch{a, phaseOf(a)})
	}
}

// Roles of a job workload's faults (MODEL §10, §20): the executor, a client
// inside a job attempt, in any phase or (executor@<phase>) in one.
const RoleExecutor = "executor"

// AimedPhase is the phase a fault's target as written aims at
// (executor@during-effect: during-effect), "" for any phase; ok false when
// the target is not the executor role.
func AimedPhase(target string) (phase string, ok bool) {
	role, phase, _ := strings.Cut(target, "@")
	if role != RoleExecutor {
		return "", false
	}
	return phase, true
}

// inside reports whether a client of instance inst is in a job attempt,
// in phase (any phase for ""): for a job workload, the executor (and the
// holder) a fault aims at (MODEL §10).
func (j *jobCheck) inside(inst, phase string) bool {
	for _, a := range j.open {
		if a.inst == inst && !j.dead(a.inst) && (phase == "" || phaseOf(a) == phase) {
			return true
		}
	}
	return false
}
