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

func newLockModel(fenced bool, lease int64) porcupine.Model {
	expires := func(call int64) int64 {
		if lease <= 0 {
			return math.MaxInt64
		}
		return call + lease
	}
	free := func(s lockState) lockState { return lockState{Holder: -1, Max: s.Max} }
	// lapsed: the holder's lease may have run out before in's return.
	lapsed := func(s lockState, in linInput) bool { return s.Holder != -1 && in.Return >= s.Expiry }
	nd := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation { return [][]porcupine.Operation{h} },
		Init:      func() []any { return []any{lockState{Holder: -1}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(lockState), input.(linInput), output.(linOutput)
			switch in.Kind {
			case history.OpAcquire:
				took := func() (lockState, bool) {
					if s.Holder != -1 && s.Holder != in.Client && !lapsed(s, in) {
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
						return []any{n}
					}
					return nil
				case "fail":
					return []any{s} // refused: nothing changed
				default: // unknown: either it took effect or it did not
					if n, ok := took(); ok {
						return []any{s, n}
					}
					return []any{s}
				}
			case history.OpRelease, history.OpExtend:
				mine := s.Holder == in.Client
				after := free(s)
				if in.Kind == history.OpExtend {
					after = lockState{Holder: in.Client, Expiry: expires(in.Call), Max: s.Max}
				}
				switch out.Result {
				case "ok":
					if mine {
						return []any{after}
					}
					return nil
				case "fail":
					if !mine {
						return []any{s}
					}
					if lapsed(s, in) {
						return []any{free(s)} // its lease ran out first
					}
					return nil
				default:
					if mine {
						return []any{s, after}
					}
					return []any{s}
				}
			case history.OpLost:
				if s.Holder == in.Client {
					return []any{free(s)}
				}
				return []any{s}
			}
			return nil
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

// LinOps collects a case's operations per key for the linearizability check.
type LinOps struct {
	clients map[string]int
	names   []string
	pending map[string]*porcupine.Operation // proc -> open operation
	pkey    map[string]string               // proc -> key of the open operation
	byKey   map[string][]porcupine.Operation
	holding map[string]string // proc -> key it believes it holds
	over    map[string]bool   // keys past MaxLinOpsPerKey
}

// NewLinOps returns an empty collector.
func NewLinOps() *LinOps {
	return &LinOps{clients: map[string]int{}, pending: map[string]*porcupine.Operation{}, pkey: map[string]string{},
		byKey: map[string][]porcupine.Operation{}, holding: map[string]string{}, over: map[string]bool{}}
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

func (l *LinOps) add(key string, op porcupine.Operation) {
	if len(l.byKey[key]) >= MaxLinOpsPerKey {
		l.over[key] = true
		return
	}
	l.byKey[key] = append(l.byKey[key], op)
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
	case (e.Type == history.OK || e.Type == history.Fail || e.Type == history.Info) && isLockOp(e.F):
		op, ok := l.pending[e.Proc]
		if !ok {
			return
		}
		delete(l.pending, e.Proc)
		in := op.Input.(linInput)
		in.Token = e.Token
		op.Return = e.T
		res := string(e.Type)
		if e.Type == history.Info {
			res = "unknown"
			op.Return = math.MaxInt64 // may take effect any time after the call
		}
		in.Return = op.Return
		op.Input = in
		op.Output = linOutput{Result: res}
		l.add(l.pkey[e.Proc], *op)
		if e.F == history.OpAcquire && e.Type == history.OK {
			l.holding[e.Proc] = e.Key
		}
		if e.F == history.OpRelease {
			delete(l.holding, e.Proc)
		}
	case e.Type == history.OK && e.F == history.OpLost:
		l.lost(e.Proc, e.Key, e.T)
	case e.Type == history.Mark && e.F == history.MarkCrash:
		for proc, key := range l.holding {
			if strings.HasPrefix(proc, e.Proc+"c") {
				l.lost(proc, key, e.T)
			}
		}
		for proc, op := range l.pending { // calls that never returned: unknown
			if strings.HasPrefix(proc, e.Proc+"c") {
				op.Return = math.MaxInt64
				in := op.Input.(linInput)
				in.Return = op.Return
				op.Input = in
				op.Output = linOutput{Result: "unknown"}
				l.add(l.pkey[proc], *op)
				delete(l.pending, proc)
			}
		}
	}
}

func (l *LinOps) lost(proc, key string, t int64) {
	id := l.client(proc)
	l.add(key, porcupine.Operation{ClientId: id, Input: linInput{Kind: history.OpLost, Client: id, Proc: proc, Call: t, Return: t}, Call: t, Return: t, Output: linOutput{Result: "ok"}})
	delete(l.holding, proc)
}

// LinResult is the linearizability verdict of a case.
type LinResult struct {
	Verdict Verdict            `json:"verdict"`
	Fenced  Verdict            `json:"fenced_verdict,omitempty"` // "" when the backend has no token
	Keys    map[string]Verdict `json:"keys,omitempty"`           // per key, plain model
	// Info holds porcupine's linearization info of each key that was not
	// Ok, for its HTML visualization.
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

// CheckLinearizable runs porcupine over each key, at most timeout per key,
// for a lock whose leases last lease (0: no lease).
func (l *LinOps) CheckLinearizable(fenced bool, lease time.Duration, timeout time.Duration) LinResult {
	// Operations still open at the end never returned: unknown outcome.
	for proc, op := range l.pending {
		op.Return = math.MaxInt64
		in := op.Input.(linInput)
		in.Return = op.Return
		op.Input = in
		op.Output = linOutput{Result: "unknown"}
		l.add(l.pkey[proc], *op)
	}
	l.pending = map[string]*porcupine.Operation{}
	res := LinResult{Verdict: Ok, Keys: map[string]Verdict{}, Info: map[string]porcupine.LinearizationInfo{}, Model: newLockModel(false, int64(lease))}
	keys := make([]string, 0, len(l.byKey))
	for k := range l.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	worse := func(a, b Verdict) Verdict {
		if a == Violation || b == Violation {
			return Violation
		}
		if a == Unknown || b == Unknown {
			return Unknown
		}
		return Ok
	}
	check := func(m porcupine.Model, ops []porcupine.Operation) (Verdict, porcupine.LinearizationInfo) {
		r, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
		switch r {
		case porcupine.Ok:
			return Ok, info
		case porcupine.Illegal:
			return Violation, info
		}
		return Unknown, info
	}
	if fenced {
		res.Fenced = Ok
	}
	for _, k := range keys {
		ops := l.byKey[k]
		v, info := check(res.Model, ops)
		if l.over[k] && v == Ok {
			v = Unknown
		}
		res.Keys[k] = v
		if v != Ok {
			res.Info[k] = info
		}
		res.Verdict = worse(res.Verdict, v)
		if fenced {
			fv, _ := check(newLockModel(true, int64(lease)), ops)
			if l.over[k] && fv == Ok {
				fv = Unknown
			}
			res.Fenced = worse(res.Fenced, fv)
		}
	}
	return res
}

// ClientNames maps porcupine client ids back to client names.
func (l *LinOps) ClientNames() []string { return l.names }
