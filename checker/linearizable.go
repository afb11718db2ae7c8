package checker

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockbench/lockbench/history"
)

// Linearizability checks the lock service's own history with porcupine
// against the lease-lock model of MODEL §8, per key: an acquire succeeds
// only when the lock is free, held by the same client, or held by a grant
// the service may already have taken back; a release or an extension
// succeeds only for the holder; a refused release is legal for a grant the
// service may have taken back. The fenced model adds that a granted token
// exceeds every token granted before.
//
// A grant g may be taken back without a release from min(E(g), R(g)): E is
// the acquire's (or latest extension's) invoke plus the lease, R comes from
// g's hold (MODEL §5): the grant itself if its client got a lost
// notification before its release completed, the instance's death if it
// died holding. So mutual exclusion and linearizability read the same hold
// intervals. A lost notification is not an operation of the service.
// Operations with an unknown outcome may take effect any time after their
// invoke, or never.
//
// The check streams: each key's history is cut into windows at moments
// when the service provably holds nothing (no call in flight, no unknown
// outcome in the window, every hold of the window known to its end, and no
// grant that may still be in force). A window is checked when it closes,
// from a free lock carrying the highest token so far, and dropped. A window
// longer than MaxLinOpsPerKey operations is checked up to that length: a
// violation found there stands, otherwise the key is Unknown. Running out
// of time is Unknown, never Ok.

// MaxLinOpsPerKey caps the operations of one key given to porcupine; longer
// windows are Unknown.
const MaxLinOpsPerKey = 20000

// linOp is one lock operation of the service's history.
type linOp struct {
	kind   string // acquire, release, extend
	client int
	proc   string
	// call and ret are the times of its invoke and completion (ret
	// math.MaxInt64 when the outcome is unknown): porcupine orders
	// operations by them, and takes two whose completion and invoke share
	// an instant as concurrent (MODEL §2, §8: a tie decides nothing).
	call   int64
	ret    int64
	result string
	token  uint64
	h      *hold // acquire: the hold it began (ok) or its possible grant (unknown)
}

// linWindow is one key's operations since the service last provably held
// nothing.
type linWindow struct {
	ops        []*linOp
	inFlight   int
	over       bool
	unresolved int
	holds      map[*hold]bool
	// possible are the clients whose known grant may still be in force,
	// each with the instant from which it no longer keeps the window open:
	// never while its client may still act on it (its release has not
	// completed), its grant's expiry bound min(E, R) once it cannot (its
	// instance died, or its release's outcome is unknown and the client
	// has moved on). grantE is each client's E (MODEL §8).
	possible map[int]int64
	grantE   map[int]int64
	// unknown are the acquires of unknown outcome in the window, which
	// may take effect at any instant after their invoke, or never: the
	// window stays open until each one's grant, were it made, could be
	// taken back by its lease. carried are those of earlier windows, the
	// latest per client: one comes back into a window where its client
	// releases or extends, the only operations its possible grant could
	// explain (for any other operation a grant the service may take back
	// is as good as a free key).
	unknown []*linOp
	carried map[int]*linOp
	// carriedRel are the releases and extensions of unknown outcome of
	// earlier windows, the latest per client: delayed, one may still
	// reach the service and take a later grant of its client (MODEL §8),
	// so it comes back into every window where its client acts.
	carriedRel map[int]*linOp
	startMax   uint64 // highest token granted before the window
	max        uint64
	checked    int
	verdict    Verdict // of its key's windows checked so far ("": none)
}

// linCheck is the streaming linearizability check of a case (MODEL §8).
type linCheck struct {
	on       bool
	isFenced bool
	lease    int64
	timeout  time.Duration // what is left of the case's budget for searches
	keys     map[string]*linWindow
	names    []string
	start    uint64
	plain    porcupine.Model
	fenced   porcupine.Model
	res      LinResult
}

func (l *linCheck) init(fenced bool, lease int64, timeout time.Duration) {
	l.on, l.isFenced, l.lease, l.timeout = true, fenced, lease, timeout
	l.keys = map[string]*linWindow{}
	from := func() uint64 { return l.start }
	l.plain, l.fenced = newLockModel(false, lease, from), newLockModel(true, lease, from)
	l.res = LinResult{Verdict: Ok, Keys: map[string]Verdict{}, Info: map[string]porcupine.LinearizationInfo{},
		Model: newLockModel(false, lease, func() uint64 { return 0 })}
	if fenced {
		l.res.Fenced = Ok
	}
}

// win is the window of the key an operation acts on, found through its
// key's state: one map lookup per event for every check of a key.
func (l *linCheck) win(o *op) *linWindow {
	if o.kl != nil && o.kl.lw != nil {
		return o.kl.lw
	}
	w := l.window(o.key)
	if o.kl != nil {
		o.kl.lw = w
	}
	return w
}

func (l *linCheck) window(key string) *linWindow {
	w := l.keys[key]
	if w == nil {
		w = &linWindow{holds: map[*hold]bool{}, possible: map[int]int64{}, grantE: map[int]int64{}, carried: map[int]*linOp{}, carriedRel: map[int]*linOp{}}
		l.keys[key] = w
	}
	return w
}

func linKind(f string) bool {
	return f == history.OpAcquire || f == history.OpRelease || f == history.OpExtend
}

func (l *linCheck) invoke(cl *client, o *op) {
	if !l.on || !linKind(o.f) {
		return
	}
	for len(l.names) <= cl.id {
		l.names = append(l.names, "")
	}
	l.names[cl.id] = cl.proc
	o.lin = &linOp{kind: o.f, client: cl.id, proc: cl.proc, call: o.call}
	w := l.win(o)
	l.maybeClose(o.key, w, o.call)
	w.inFlight++
}

// expires is E of a grant or extension invoked at call: the earliest its
// lease may run out (never without a lease).
func (l *linCheck) expires(call int64) int64 {
	if l.lease <= 0 {
		return never
	}
	return call + l.lease
}

func (l *linCheck) add(w *linWindow, lo *linOp) {
	if len(w.ops) >= MaxLinOpsPerKey {
		w.over = true
		return
	}
	w.ops = append(w.ops, lo)
}

func (l *linCheck) complete(cl *client, o *op, e *history.Event) {
	lo := o.lin
	if lo == nil {
		return
	}
	w := l.win(o)
	w.inFlight--
	if e.Type == history.Unsent {
		// MODEL §8: it surely never reached the service: no effect, no
		// constraint, not in the service's history. A release not sent
		// leaves its grant to the lease, as one whose outcome is unknown
		// does once its client has moved on.
		if _, ok := w.possible[cl.id]; ok && o.f == history.OpRelease {
			w.possible[cl.id] = w.grantE[cl.id]
		}
		l.maybeClose(o.key, w, e.T)
		return
	}
	lo.ret, lo.result, lo.token = e.T, string(e.Type), e.Token
	if e.Type == history.Info {
		lo.ret, lo.result = math.MaxInt64, "unknown"
	}
	switch {
	case o.f == history.OpAcquire:
		lo.h = o.h
		switch e.Type {
		case history.OK:
			if o.h != nil && !w.holds[o.h] && !o.h.resolved {
				w.holds[o.h] = true
				w.unresolved++
				o.h.lin = w
			}
			clear(w.possible) // every other known grant was taken back by now
			w.possible[cl.id] = never
			w.grantE[cl.id] = l.expires(o.call)
			if e.Token > w.max {
				w.max = e.Token
			}
		case history.Info:
			w.unknown = append(w.unknown, lo)
		}
	case o.f == history.OpExtend && e.Type != history.Fail:
		w.grantE[cl.id] = max(w.grantE[cl.id], l.expires(o.call)) // it may have renewed E
	case o.f == history.OpRelease && e.Type == history.Info:
		if _, ok := w.possible[cl.id]; ok {
			// Its client has moved on; the grant, were it still there,
			// goes when the service may take it back.
			w.possible[cl.id] = w.grantE[cl.id]
		}
	}
	switch {
	case e.Type == history.OK && o.f == history.OpRelease, e.Type == history.Fail && o.f != history.OpAcquire:
		delete(w.possible, cl.id) // the service says it holds nothing of cl's
	}
	l.add(w, lo)
	l.maybeClose(o.key, w, e.T)
}

// unknown makes an operation in flight at its instance's death, or at the
// end, an unknown outcome.
func (l *linCheck) unknown(cl *client, o *op) {
	lo := o.lin
	if lo == nil {
		return
	}
	w := l.win(o)
	w.inFlight--
	lo.ret, lo.result = math.MaxInt64, "unknown"
	if o.f == history.OpAcquire {
		lo.h = o.h
		w.unknown = append(w.unknown, lo)
	}
	l.add(w, lo)
}

func (l *linCheck) resolved(h *hold) {
	w := h.lin
	if w == nil {
		return
	}
	h.lin = nil
	if w.holds[h] {
		delete(w.holds, h)
		w.unresolved--
	}
	if _, ok := w.possible[h.cl.id]; ok && h.death >= 0 {
		// Its client is dead: nothing more will act on the grant.
		w.possible[h.cl.id] = min(w.grantE[h.cl.id], h.death)
	}
	l.maybeClose(h.key, w, h.end)
}

// maybeClose checks and empties a window at now, when the service
// provably holds nothing that a later operation could tell from a free
// key (MODEL §8): no call in flight, every hold of the window known to its
// end, no client that may still act on a grant, and every grant that may
// still be in force, or be made by an acquire of unknown outcome, one the
// service may already take back.
func (l *linCheck) maybeClose(key string, w *linWindow, now int64) {
	if len(w.ops) == 0 || w.inFlight > 0 || w.over || w.unresolved > 0 {
		return
	}
	for _, from := range w.possible {
		if now < from {
			return
		}
	}
	for _, u := range w.unknown {
		if now < l.unknownFrom(u) {
			return
		}
	}
	l.check(key, w)
	for _, u := range w.unknown {
		if c := w.carried[u.client]; c == nil || u.call > c.call {
			w.carried[u.client] = u
		}
	}
	for _, o := range w.ops {
		if o.kind != history.OpAcquire && o.result == "unknown" {
			if c := w.carriedRel[o.client]; c == nil || o.call > c.call {
				w.carriedRel[o.client] = o
			}
		}
	}
	w.ops, w.unknown = w.ops[:0], w.unknown[:0]
	w.startMax = w.max
	w.checked++
}

// unknownFrom is when the grant an unknown acquire may make could be
// taken back: its E, or its instance's death.
func (l *linCheck) unknownFrom(u *linOp) int64 {
	from := l.expires(u.call)
	if u.h != nil && u.h.death >= 0 {
		from = min(from, u.h.death)
	}
	return from
}

// windowOps are a window's operations and the carried ones that come back
// into it.
func windowOps(w *linWindow) []*linOp {
	ops := w.ops
	if len(w.carried) > 0 || len(w.carriedRel) > 0 {
		acts, acting := map[int]bool{}, map[int]bool{}
		for _, o := range w.ops {
			acting[o.client] = true
			if o.kind != history.OpAcquire {
				acts[o.client] = true
			}
		}
		for c, u := range w.carried {
			if acts[c] {
				ops = append(slices.Clip(ops), u)
			}
		}
		for c, u := range w.carriedRel {
			if acting[c] && !slices.Contains(ops, u) {
				ops = append(slices.Clip(ops), u)
			}
		}
	}
	return ops
}

// operations turns a window into porcupine operations; every hold of it is
// known by now, so each grant's R is. A carried acquire of unknown outcome
// comes back where its client releases or extends.
func operations(w *linWindow) []porcupine.Operation {
	ops := windowOps(w)
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		in := linInput{Kind: o.kind, Client: o.client, Proc: o.proc, Token: o.token, Call: o.call, Return: o.ret, Revoke: never}
		if o.h != nil {
			in.Revoke = o.h.revokeFrom()
		}
		out = append(out, porcupine.Operation{ClientId: o.client, Input: in, Call: o.call, Return: o.ret, Output: linOutput{Result: o.result}})
	}
	return out
}

// check runs porcupine over a window and folds the verdict into the result.
func (l *linCheck) check(key string, w *linWindow) {
	// Most windows are one grant and its release, one after the other:
	// judged in place, without building a search.
	if len(w.carried) == 0 && !w.over {
		if v, ok := l.sequentialOps(w.ops, false, w.startMax); ok {
			fv := Verdict("")
			if l.isFenced {
				fv, _ = l.sequentialOps(w.ops, true, w.startMax)
			}
			if v == Ok && (fv == Ok || fv == "") {
				l.fold(key, w, v, fv, porcupine.LinearizationInfo{})
				return
			}
		}
	}
	ops := operations(w)
	proof := grantProof(windowOps(w), l.lease)
	run := func(m porcupine.Model, fenced bool) (Verdict, porcupine.LinearizationInfo) {
		if v, ok := sequential(ops, fenced, l.lease, w.startMax); ok && !w.over {
			return v, porcupine.LinearizationInfo{}
		}
		if proof {
			// No order can hold: do not search them all (a window that is
			// not linearizable is the search's worst case).
			return Violation, porcupine.LinearizationInfo{}
		}
		l.start = w.startMax
		if l.timeout <= 0 {
			return Unknown, porcupine.LinearizationInfo{} // the case's budget is spent
		}
		t0 := time.Now()
		r, info := porcupine.CheckOperationsVerbose(m, ops, l.timeout)
		l.timeout -= time.Since(t0)
		switch r {
		case porcupine.Ok:
			if w.over {
				return Unknown, info // only a prefix was checked
			}
			return Ok, info
		case porcupine.Illegal:
			return Violation, info
		}
		return Unknown, info
	}
	v, info := run(l.plain, false)
	if _, kept := l.res.Info[key]; v == Violation && len(info.PartialLinearizations()) == 0 && !kept {
		// Found without a search: let porcupine describe it, for the
		// picture only (a second, bounded search).
		l.start = w.startMax
		if l.timeout > 0 {
			t0 := time.Now()
			_, info = porcupine.CheckOperationsVerbose(l.plain, ops, min(l.timeout, describeTimeout))
			l.timeout -= time.Since(t0)
		}
	}
	fv := Verdict("")
	if l.isFenced {
		fv = Violation
		if !tokensRegress(w.ops, w.startMax) {
			fv, _ = run(l.fenced, true)
		}
	}
	l.fold(key, w, v, fv, info)
}

// fold adds a window's verdicts to its key's and the case's.
func (l *linCheck) fold(key string, w *linWindow, v, fv Verdict, info porcupine.LinearizationInfo) {
	if w.verdict == "" {
		w.verdict = Ok
	}
	w.verdict = worse(w.verdict, v)
	if _, kept := l.res.Info[key]; v != Ok && !kept {
		l.res.Info[key] = info // the first window that was not Ok
	}
	l.res.Verdict = worse(l.res.Verdict, v)
	if l.isFenced {
		l.res.Fenced = worse(l.res.Fenced, fv)
	}
}

// sequentialOps is sequential on the window's own operations, without
// converting them: false when they overlap or one has an unknown outcome.
func (l *linCheck) sequentialOps(ops []*linOp, fenced bool, startMax uint64) (Verdict, bool) {
	var last int64 = math.MinInt64
	for _, o := range ops {
		if o.call <= last || o.ret == math.MaxInt64 || o.result == "unknown" {
			return "", false
		}
		last = o.ret
	}
	s := lockState{Holder: -1, Max: startMax}
	for _, o := range ops {
		in := linInput{Kind: o.kind, Client: o.client, Token: o.token, Call: o.call, Return: o.ret, Revoke: never}
		if o.h != nil {
			in.Revoke = o.h.revokeFrom()
		}
		next := step(s, in, linOutput{Result: o.result}, fenced, l.lease)
		if len(next) != 1 {
			return Violation, true
		}
		s = next[0]
	}
	return Ok, true
}

func worse(a, b Verdict) Verdict {
	if a == Violation || b == Violation {
		return Violation
	}
	if a == Unknown || b == Unknown {
		return Unknown
	}
	return Ok
}

// LinResult is the linearizability verdict of a case.
type LinResult struct {
	Verdict Verdict            `json:"verdict"`
	Fenced  Verdict            `json:"fenced_verdict,omitempty"` // "" when the backend has no token
	Keys    map[string]Verdict `json:"keys,omitempty"`           // per key, plain model
	// Windows is how many windows were checked in all.
	Windows int `json:"windows,omitempty"`
	// Info holds porcupine's linearization info of the first window of
	// each key that was not Ok, for its HTML visualization; ClientNames
	// maps its client ids back to names.
	Info        map[string]porcupine.LinearizationInfo `json:"-"`
	Model       porcupine.Model                        `json:"-"`
	ClientNames []string                               `json:"-"`
}

// Judged returns r as it may be reported for a case whose run was valid or
// not: an invalid run proves nothing, so what it did not find is Unknown;
// what it did find stays a violation.
func (r LinResult) Judged(valid bool) LinResult {
	if valid {
		return r
	}
	if r.Verdict == Ok {
		r.Verdict = Unknown
	}
	if r.Fenced == Ok {
		r.Fenced = Unknown
	}
	return r
}

// result checks what is left open and returns the verdict.
func (l *linCheck) result() LinResult {
	if !l.on {
		return LinResult{Verdict: NotApplicable}
	}
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := l.keys[k]
		if len(w.ops) > 0 {
			l.check(k, w)
			w.checked++
		}
		l.res.Windows += w.checked
		if w.verdict != "" {
			l.res.Keys[k] = w.verdict
		}
	}
	l.res.ClientNames = l.names
	return l.res
}
