package checker

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockbench/lockbench/internal/history"
)

// Linearizability checks the lock service's own history with porcupine,
// against a model of a lease lock partitioned by key: an acquire succeeds
// only when the lock is free or the holder's lease may have run out; a
// release or an extension succeeds only for the holder; a release refused
// to a holder is legal once its lease may have run out. The fenced model
// adds that a successful acquire's token must exceed every token granted
// before.
//
// A lease is assumed to start no earlier than its acquire (or extension)
// was called, so it cannot run out before that call's time plus the lease
// (CaseMeta.LeaseNs); with no lease (PostgreSQL) a holder keeps the lock
// until it releases or is lost. Operations with an unknown outcome (info)
// may have taken effect at any time after they were called: their return
// is +∞ and the model accepts either outcome. A client that learns its
// lease is lost, or whose instance dies, releases the lock in the model at
// that moment.
//
// Where this and the mutual-exclusion check differ: the mutual-exclusion
// check counts two clients *believing* they hold a key at once; this one
// asks whether the *service* behaved as a lease lock. A holder paused past
// its lease is a mutual-exclusion violation but linearizable (the service
// rightly expired the lease). And the service renews leases in the
// background for some backends (etcd, Consul and ZooKeeper sessions),
// which the history does not record: for holds longer than the lease this
// model is more lenient than the service promises.
//
// The check is bounded per key; running out of time is Unknown, never Ok.

// MaxLinOpsPerKey caps the operations of one key given to porcupine; longer
// histories are Unknown.
const MaxLinOpsPerKey = 20000

type linInput struct {
	Kind   string // acquire, release, extend, lost
	Client int
	Proc   string
	Token  uint64
	Call   int64
	Return int64 // math.MaxInt64 when the outcome is unknown
}

type linOutput struct {
	Result string // ok, fail, unknown
}

type lockState struct {
	Holder int   // -1: free
	Expiry int64 // earliest time the holder's lease can have run out
	Max    uint64
}

// step is the lease-lock model: the states an operation can leave a lock
// in (none: the operation is illegal in that state). Outcomes that are
// known give at most one state; an unknown one may give two.
func step(s lockState, in linInput, out linOutput, fenced bool, lease int64) []lockState {
	expires := func(call int64) int64 {
		if lease <= 0 {
			return math.MaxInt64
		}
		return call + lease
	}
	free := lockState{Holder: -1, Max: s.Max}
	// lapsed: the holder's lease may have run out before in's return.
	lapsed := s.Holder != -1 && in.Return >= s.Expiry
	switch in.Kind {
	case history.OpAcquire:
		took := func() (lockState, bool) {
			if s.Holder != -1 && s.Holder != in.Client && !lapsed {
				return s, false
			}
			if fenced && in.Token <= s.Max {
				return s, false
			}
			n := lockState{Holder: in.Client, Expiry: expires(in.Call), Max: s.Max}
			if in.Token > n.Max {
				n.Max = in.Token
			}
			return n, true
		}
		switch out.Result {
		case "ok":
			if n, ok := took(); ok {
				return []lockState{n}
			}
			return nil
		case "fail":
			return []lockState{s} // refused: nothing changed
		default: // unknown: either it took effect or it did not
			if n, ok := took(); ok {
				return []lockState{s, n}
			}
			return []lockState{s}
		}
	case history.OpRelease, history.OpExtend:
		mine := s.Holder == in.Client
		after := free
		if in.Kind == history.OpExtend {
			after = lockState{Holder: in.Client, Expiry: expires(in.Call), Max: s.Max}
		}
		switch out.Result {
		case "ok":
			if mine {
				return []lockState{after}
			}
			return nil
		case "fail":
			if !mine {
				return []lockState{s}
			}
			if lapsed {
				return []lockState{free} // its lease ran out first
			}
			return nil
		default:
			if mine {
				return []lockState{s, after}
			}
			return []lockState{s}
		}
	case history.OpLost:
		if s.Holder == in.Client {
			return []lockState{free}
		}
		return []lockState{s}
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

// sequential checks a window whose operations do not overlap in time and
// all have known outcomes: there is one order to try, so the model is
// simply run; porcupine's search is needed only when calls overlap. It
// reports false when the window is not of that shape.
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

// LinOps checks a case's lock operations per key as they stream in. Each
// key's history is cut into windows at moments when the key is provably
// free: nobody believes it holds it, no call on it is in flight, and no
// call of the window had an unknown outcome (which could still take
// effect). A window is checked as soon as it closes, from a free lock that
// carries the highest token granted so far, and dropped: memory is bounded
// by the longest window, not by the history. A window longer than
// MaxLinOpsPerKey operations (a key never quiet, or an unknown outcome
// that keeps it open) is checked up to that length: a violation found
// there stands, otherwise the key is Unknown.
type LinOps struct {
	isFenced bool
	lease    int64
	timeout  time.Duration

	clients map[string]int
	names   []string
	pending map[string]*porcupine.Operation // proc -> open operation
	pkey    map[string]string               // proc -> key of the open operation
	holding map[string]string               // proc -> key it believes it holds
	keys    map[string]*window

	start         uint64 // the window being checked starts after this token
	plain, fenced porcupine.Model
	res           LinResult
}

type window struct {
	ops      []porcupine.Operation
	inFlight int
	holders  int
	unknown  bool
	over     bool
	startMax uint64 // highest token granted before the window
	max      uint64 // highest token granted so far
	checked  int    // windows already checked
}

// NewLinOps returns an empty collector for a lock with or without fencing
// tokens whose leases last lease (0: none), checking each window for at
// most timeout.
func NewLinOps(fenced bool, lease, timeout time.Duration) *LinOps {
	l := &LinOps{isFenced: fenced, lease: int64(lease), timeout: timeout, clients: map[string]int{},
		pending: map[string]*porcupine.Operation{}, pkey: map[string]string{}, holding: map[string]string{},
		keys: map[string]*window{}}
	from := func() uint64 { return l.start }
	l.plain, l.fenced = newLockModel(false, l.lease, from), newLockModel(true, l.lease, from)
	l.res = LinResult{Verdict: Ok, Keys: map[string]Verdict{}, Info: map[string]porcupine.LinearizationInfo{},
		Model: newLockModel(false, l.lease, func() uint64 { return 0 })}
	if fenced {
		l.res.Fenced = Ok
	}
	return l
}

func (l *LinOps) client(proc string) int {
	id, ok := l.clients[proc]
	if !ok {
		id = len(l.names)
		l.clients[proc] = id
		l.names = append(l.names, proc)
	}
	return id
}

func (l *LinOps) win(key string) *window {
	w := l.keys[key]
	if w == nil {
		w = &window{}
		l.keys[key] = w
	}
	return w
}

func (l *LinOps) add(key string, op porcupine.Operation) {
	w := l.win(key)
	if len(w.ops) >= MaxLinOpsPerKey {
		w.over = true
		return
	}
	w.ops = append(w.ops, op)
}

func isLockOp(f string) bool {
	return f == history.OpAcquire || f == history.OpRelease || f == history.OpExtend
}

// Add feeds one event, in time order.
func (l *LinOps) Add(e *history.Event) {
	switch {
	case e.Type == history.Invoke && isLockOp(e.F):
		id := l.client(e.Proc)
		l.pending[e.Proc] = &porcupine.Operation{ClientId: id, Input: linInput{Kind: e.F, Client: id, Proc: e.Proc, Call: e.T}, Call: e.T}
		l.pkey[e.Proc] = e.Key
		l.win(e.Key).inFlight++
	case (e.Type == history.OK || e.Type == history.Fail || e.Type == history.Info) && isLockOp(e.F):
		op, ok := l.pending[e.Proc]
		if !ok {
			return
		}
		key := l.pkey[e.Proc]
		delete(l.pending, e.Proc)
		w := l.win(key)
		w.inFlight--
		in := op.Input.(linInput)
		in.Token = e.Token
		op.Return = e.T
		res := string(e.Type)
		if e.Type == history.Info {
			res = "unknown"
			op.Return = math.MaxInt64 // may take effect any time after the call
			w.unknown = true
		}
		in.Return = op.Return
		op.Input = in
		op.Output = linOutput{Result: res}
		l.add(key, *op)
		if e.F == history.OpAcquire && e.Type == history.OK {
			if old, held := l.holding[e.Proc]; !held || old != key {
				w.holders++
			}
			l.holding[e.Proc] = key
			if e.Token > w.max {
				w.max = e.Token
			}
		}
		if e.F == history.OpRelease {
			l.unhold(e.Proc)
		}
		l.maybeClose(key)
	case e.Type == history.OK && e.F == history.OpLost:
		l.lost(e.Proc, e.Key, e.T)
		l.maybeClose(e.Key)
	case e.Type == history.Mark && e.F == history.MarkCrash:
		var touched []string
		for proc, key := range l.holding {
			if strings.HasPrefix(proc, e.Proc+"c") {
				l.lost(proc, key, e.T)
				touched = append(touched, key)
			}
		}
		for proc, op := range l.pending { // calls that never returned: unknown
			if strings.HasPrefix(proc, e.Proc+"c") {
				key := l.pkey[proc]
				w := l.win(key)
				w.inFlight--
				w.unknown = true
				op.Return = math.MaxInt64
				in := op.Input.(linInput)
				in.Return = op.Return
				op.Input = in
				op.Output = linOutput{Result: "unknown"}
				l.add(key, *op)
				delete(l.pending, proc)
			}
		}
		for _, k := range touched {
			l.maybeClose(k)
		}
	}
}

func (l *LinOps) unhold(proc string) {
	if key, ok := l.holding[proc]; ok {
		l.win(key).holders--
		delete(l.holding, proc)
	}
}

func (l *LinOps) lost(proc, key string, t int64) {
	id := l.client(proc)
	l.add(key, porcupine.Operation{ClientId: id, Input: linInput{Kind: history.OpLost, Client: id, Proc: proc, Call: t, Return: t}, Call: t, Return: t, Output: linOutput{Result: "ok"}})
	l.unhold(proc)
}

// maybeClose checks and drops key's window if the key is provably free.
func (l *LinOps) maybeClose(key string) {
	w := l.keys[key]
	if w == nil || len(w.ops) == 0 || w.inFlight > 0 || w.holders > 0 || w.unknown || w.over {
		return
	}
	l.check(key, w)
	w.ops = w.ops[:0]
	w.startMax = w.max
	w.checked++
}

// check runs porcupine over a window and folds the verdict into the result.
func (l *LinOps) check(key string, w *window) {
	worse := func(a, b Verdict) Verdict {
		if a == Violation || b == Violation {
			return Violation
		}
		if a == Unknown || b == Unknown {
			return Unknown
		}
		return Ok
	}
	run := func(m porcupine.Model, fenced bool) (Verdict, porcupine.LinearizationInfo) {
		if v, ok := sequential(w.ops, fenced, l.lease, w.startMax); ok && !w.over {
			return v, porcupine.LinearizationInfo{}
		}
		l.start = w.startMax
		r, info := porcupine.CheckOperationsVerbose(m, w.ops, l.timeout)
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
		_, info = porcupine.CheckOperationsVerbose(l.plain, w.ops, l.timeout)
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
		fv, _ := run(l.fenced, true)
		l.res.Fenced = worse(l.res.Fenced, fv)
	}
}

// LinResult is the linearizability verdict of a case.
type LinResult struct {
	Verdict Verdict            `json:"verdict"`
	Fenced  Verdict            `json:"fenced_verdict,omitempty"` // "" when the backend has no token
	Keys    map[string]Verdict `json:"keys,omitempty"`           // per key, plain model
	// Windows is how many windows were checked in all.
	Windows int `json:"windows,omitempty"`
	// Info holds porcupine's linearization info of the first window of
	// each key that was not Ok, for its HTML visualization.
	Info  map[string]porcupine.LinearizationInfo `json:"-"`
	Model porcupine.Model                        `json:"-"`
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

// Result checks what is left open (operations still in flight at the end
// never returned: their outcome is unknown) and returns the verdict.
func (l *LinOps) Result() LinResult {
	for proc, op := range l.pending {
		op.Return = math.MaxInt64
		in := op.Input.(linInput)
		in.Return = op.Return
		op.Input = in
		op.Output = linOutput{Result: "unknown"}
		l.add(l.pkey[proc], *op)
	}
	l.pending = map[string]*porcupine.Operation{}
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
	return l.res
}

// ClientNames maps porcupine client ids back to client names.
func (l *LinOps) ClientNames() []string { return l.names }
