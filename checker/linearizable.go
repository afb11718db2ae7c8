package checker

import (
	"fmt"
	"math"
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
	call   int64
	ret    int64 // math.MaxInt64 when the outcome is unknown
	// callSeq and retSeq are the positions of its invoke and completion
	// in the history: porcupine orders operations by them, so that events
	// with equal times happen in file order (MODEL §2).
	callSeq, retSeq int64
	result          string
	token           uint64
	h               *hold // acquire: the hold it began (ok) or its possible grant (unknown)
}

type linInput struct {
	Kind   string
	Client int
	Proc   string
	Token  uint64
	Call   int64
	Return int64
	Revoke int64 // R of the grant an acquire makes
}

type linOutput struct {
	Result string // ok, fail, unknown
}

type lockState struct {
	Holder int   // -1: free
	Expiry int64 // E: earliest the lease can have run out
	Revoke int64 // R: earliest the service may take it back
	Max    uint64
	// Now is the instant the last operation took effect: the next one
	// takes effect at or after it, within its own interval (MODEL §8).
	Now int64
}

// step is the lease-lock model (MODEL §8): the states an operation can
// leave a lock in (none: the operation is illegal in that state). Each
// operation takes effect at one instant p of its interval [Call, Return],
// no earlier than the operation before it (s.Now). The only choice of p
// that matters is the earliest one, and, when the holder's grant must be
// expirable for the operation to be legal, the earliest instant at which it
// is: a later instant only constrains what follows.
func step(s lockState, in linInput, out linOutput, fenced bool, lease int64) []lockState {
	pe := max(s.Now, in.Call) // the earliest instant it can take effect
	if pe > in.Return {
		return nil
	}
	expires := func(call int64) int64 {
		if lease <= 0 {
			return never
		}
		return call + lease
	}
	at := func(st lockState, p int64) lockState { st.Now = p; return st }
	free := lockState{Holder: -1, Max: s.Max}
	// px is the earliest instant at which the holder's grant is
	// expirable, -1 when that is not within the operation's interval.
	px := int64(-1)
	if s.Holder != -1 {
		if t := max(pe, min(s.Expiry, s.Revoke)); t <= in.Return {
			px = t
		}
	}
	mine := s.Holder == in.Client
	switch in.Kind {
	case history.OpAcquire:
		n := lockState{Holder: in.Client, Expiry: expires(in.Call), Revoke: in.Revoke, Max: s.Max}
		p := pe
		if s.Holder != -1 && !mine {
			p = px // another client's grant must be expirable
		}
		switch out.Result {
		case "ok":
			if p < 0 || (fenced && in.Token <= s.Max) {
				return nil
			}
			n.Max = max(n.Max, in.Token)
			return []lockState{at(n, p)}
		case "fail":
			return []lockState{at(s, pe)}
		default: // unknown: it took effect (token unknown) or not
			if p < 0 {
				return []lockState{at(s, pe)}
			}
			return []lockState{at(s, pe), at(n, p)}
		}
	case history.OpRelease, history.OpExtend:
		after := free
		if in.Kind == history.OpExtend {
			after = lockState{Holder: in.Client, Expiry: expires(in.Call), Revoke: s.Revoke, Max: s.Max}
		}
		switch out.Result {
		case "ok":
			if mine {
				return []lockState{at(after, pe)}
			}
			return nil
		case "fail":
			switch {
			case !mine:
				return []lockState{at(s, pe)}
			case px >= 0:
				return []lockState{at(free, px)} // its grant ran out first
			}
			return nil
		default:
			if mine {
				return []lockState{at(s, pe), at(after, pe)}
			}
			return []lockState{at(s, pe)}
		}
	}
	return nil
}

// newLockModel is step as a porcupine model; start gives the state a
// window starts from (a free lock, with the highest token granted so far).
func newLockModel(fenced bool, lease int64, start func() uint64) porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation { return [][]porcupine.Operation{h} },
		Init:      func() []any { return []any{lockState{Holder: -1, Max: start()}} },
		Step: func(state, input, output any) []any {
			next := step(state.(lockState), input.(linInput), output.(linOutput), fenced, lease)
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			tok := ""
			if in.Token > 0 {
				tok = fmt.Sprintf(" token %d", in.Token)
			}
			return fmt.Sprintf("%s %s%s -> %s", in.Proc, in.Kind, tok, out.Result)
		},
		DescribeState: func(state any) string {
			s := state.(lockState)
			if s.Holder == -1 {
				return fmt.Sprintf("free (max token %d)", s.Max)
			}
			return fmt.Sprintf("held by client %d (max token %d)", s.Holder, s.Max)
		},
	}
	return nd.ToModel()
}

// linWindow is one key's operations since the service last provably held
// nothing.
type linWindow struct {
	ops        []*linOp
	inFlight   int
	unknown    bool
	over       bool
	unresolved int
	holds      map[*hold]bool
	possible   map[int]bool // clients whose grant may still be in force
	startMax   uint64       // highest token granted before the window
	max        uint64
	checked    int
}

// linCheck is the streaming linearizability check of a case (MODEL §8).
type linCheck struct {
	on       bool
	isFenced bool
	lease    int64
	timeout  time.Duration
	keys     map[string]*linWindow
	names    []string
	start    uint64
	seq      int64 // position of the event being read
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

func (l *linCheck) win(key string) *linWindow {
	w := l.keys[key]
	if w == nil {
		w = &linWindow{holds: map[*hold]bool{}, possible: map[int]bool{}}
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
	o.lin = &linOp{kind: o.f, client: cl.id, proc: cl.proc, call: o.call, callSeq: l.seq}
	l.win(o.key).inFlight++
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
	w := l.win(o.key)
	w.inFlight--
	lo.ret, lo.retSeq, lo.result, lo.token = e.T, l.seq, string(e.Type), e.Token
	if e.Type == history.Info {
		lo.ret, lo.retSeq, lo.result = math.MaxInt64, math.MaxInt64, "unknown"
		w.unknown = true
	}
	switch {
	case o.f == history.OpAcquire:
		lo.h = o.h
		if e.Type == history.OK {
			if o.h != nil && !w.holds[o.h] && !o.h.resolved {
				w.holds[o.h] = true
				w.unresolved++
				o.h.lin = w
			}
			clear(w.possible)
			w.possible[cl.id] = true
			if e.Token > w.max {
				w.max = e.Token
			}
		}
	case e.Type == history.OK && o.f == history.OpRelease, e.Type == history.Fail && o.f != history.OpAcquire:
		delete(w.possible, cl.id) // the service says it holds nothing of cl's
	}
	l.add(w, lo)
	l.maybeClose(o.key, w)
}

// unknown makes an operation in flight at its instance's death, or at the
// end, an unknown outcome.
func (l *linCheck) unknown(cl *client, o *op) {
	lo := o.lin
	if lo == nil {
		return
	}
	w := l.win(o.key)
	w.inFlight--
	w.unknown = true
	lo.ret, lo.retSeq, lo.result = math.MaxInt64, math.MaxInt64, "unknown"
	if o.f == history.OpAcquire {
		lo.h = o.h
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
	l.maybeClose(h.key, w)
}

func (l *linCheck) maybeClose(key string, w *linWindow) {
	if len(w.ops) == 0 || w.inFlight > 0 || w.unknown || w.over || w.unresolved > 0 || len(w.possible) > 0 {
		return
	}
	l.check(key, w)
	w.ops = w.ops[:0]
	w.startMax = w.max
	w.checked++
}

// operations turns a window into porcupine operations; every hold of it is
// known by now, so each grant's R is.
func operations(w *linWindow) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(w.ops))
	for _, o := range w.ops {
		in := linInput{Kind: o.kind, Client: o.client, Proc: o.proc, Token: o.token, Call: o.call, Return: o.ret, Revoke: never}
		if o.h != nil {
			in.Revoke = o.h.revokeFrom()
		}
		out = append(out, porcupine.Operation{ClientId: o.client, Input: in, Call: o.callSeq, Return: o.retSeq, Output: linOutput{Result: o.result}})
	}
	return out
}

// sequential checks a window whose operations do not overlap in time and
// all have known outcomes: there is one order to try. It reports false
// when the window is not of that shape.
func sequential(ops []porcupine.Operation, fenced bool, lease int64, startMax uint64) (Verdict, bool) {
	var last int64 = math.MinInt64
	for _, op := range ops {
		if op.Call < last || op.Return == math.MaxInt64 || op.Output.(linOutput).Result == "unknown" {
			return "", false
		}
		last = op.Return
	}
	s := lockState{Holder: -1, Max: startMax}
	for _, op := range ops {
		next := step(s, op.Input.(linInput), op.Output.(linOutput), fenced, lease)
		if len(next) != 1 {
			return Violation, true
		}
		s = next[0]
	}
	return Ok, true
}

// check runs porcupine over a window and folds the verdict into the result.
func (l *linCheck) check(key string, w *linWindow) {
	ops := operations(w)
	run := func(m porcupine.Model, fenced bool) (Verdict, porcupine.LinearizationInfo) {
		if v, ok := sequential(ops, fenced, l.lease, w.startMax); ok && !w.over {
			return v, porcupine.LinearizationInfo{}
		}
		l.start = w.startMax
		r, info := porcupine.CheckOperationsVerbose(m, ops, l.timeout)
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
	if v == Violation && len(info.PartialLinearizations()) == 0 {
		// Found by the sequential check: let porcupine describe it.
		l.start = w.startMax
		_, info = porcupine.CheckOperationsVerbose(l.plain, ops, l.timeout)
	}
	prev, seen := l.res.Keys[key]
	if !seen {
		prev = Ok
	}
	l.res.Keys[key] = worse(prev, v)
	if _, kept := l.res.Info[key]; v != Ok && !kept {
		l.res.Info[key] = info // the first window that was not Ok
	}
	l.res.Verdict = worse(l.res.Verdict, v)
	if l.isFenced {
		fv := Violation
		if !tokensRegress(w.ops, w.startMax) {
			fv, _ = run(l.fenced, true)
		}
		l.res.Fenced = worse(l.res.Fenced, fv)
	}
}

// tokensRegress is a proof, cheaper than any search, that the fenced model
// fails: an ok acquire whose token is not above the token of an ok acquire
// that completed before it was invoked (or of an earlier window). Every
// order of instants puts the earlier grant first, so the token rule of
// MODEL §8 is broken whatever else happened.
func tokensRegress(ops []*linOp, before uint64) bool {
	var acq []*linOp
	for _, o := range ops {
		if o.kind == history.OpAcquire && o.result == "ok" {
			acq = append(acq, o)
		}
	}
	byRet := append([]*linOp(nil), acq...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].retSeq < byRet[j].retSeq })
	byCall := append([]*linOp(nil), acq...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].callSeq < byCall[j].callSeq })
	highest, j := before, 0
	for _, b := range byCall {
		for j < len(byRet) && byRet[j].retSeq < b.callSeq {
			highest = max(highest, byRet[j].token)
			j++
		}
		if b.token <= highest {
			return true
		}
	}
	return false
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
		if _, seen := l.res.Keys[k]; !seen && w.checked > 0 {
			l.res.Keys[k] = Ok
		}
	}
	l.res.ClientNames = l.names
	return l.res
}
