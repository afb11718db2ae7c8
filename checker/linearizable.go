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

// Linearizability checks the lock service's history itself, with porcupine,
// against a mutex model partitioned by key: acquire succeeds only when the
// lock is free, release succeeds only for its holder. The fenced model adds
// that a successful acquire's token must be higher than every token granted
// before. Operations with an unknown outcome (info) may have taken effect at
// any time after they were called: their return is +∞ and the model accepts
// either outcome. A client that learns its lease is lost, or whose instance
// crashes, releases the lock in the model at that moment; a lease that
// expires unnoticed (a paused holder) is, as in the mutual-exclusion check,
// not a release, so another client's acquire is illegal.
//
// The check is bounded per key; running out of time is Unknown, never Ok.

// MaxLinOpsPerKey caps the operations of one key given to porcupine; longer
// histories are Unknown.
const MaxLinOpsPerKey = 20000

type linInput struct {
	Kind   string // acquire, release, lost
	Client int
	Proc   string
	Token  uint64
}

type linOutput struct {
	Result string // ok, fail, unknown
}

type lockState struct {
	Holder int // -1: free
	Max    uint64
}

func newLockModel(fenced bool) porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation { return [][]porcupine.Operation{h} },
		Init:      func() []any { return []any{lockState{Holder: -1}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(lockState), input.(linInput), output.(linOutput)
			switch in.Kind {
			case history.OpAcquire:
				took := func() (lockState, bool) {
					if s.Holder != -1 && s.Holder != in.Client {
						return s, false
					}
					if fenced && in.Token <= s.Max {
						return s, false
					}
					n := lockState{Holder: in.Client, Max: s.Max}
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
			case history.OpRelease:
				switch out.Result {
				case "ok":
					if s.Holder == in.Client {
						return []any{lockState{Holder: -1, Max: s.Max}}
					}
					return nil
				case "fail":
					if s.Holder != in.Client {
						return []any{s}
					}
					return nil
				default:
					if s.Holder == in.Client {
						return []any{s, lockState{Holder: -1, Max: s.Max}}
					}
					return []any{s}
				}
			case history.OpLost:
				if s.Holder == in.Client {
					return []any{lockState{Holder: -1, Max: s.Max}}
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

// Add feeds one event, in time order.
func (l *LinOps) Add(e *history.Event) {
	switch {
	case e.Type == history.Invoke && (e.F == history.OpAcquire || e.F == history.OpRelease):
		id := l.client(e.Proc)
		l.pending[e.Proc] = &porcupine.Operation{ClientId: id, Input: linInput{Kind: e.F, Client: id, Proc: e.Proc}, Call: e.T}
		l.pkey[e.Proc] = e.Key
	case (e.Type == history.OK || e.Type == history.Fail || e.Type == history.Info) && (e.F == history.OpAcquire || e.F == history.OpRelease):
		op, ok := l.pending[e.Proc]
		if !ok {
			return
		}
		delete(l.pending, e.Proc)
		in := op.Input.(linInput)
		in.Token = e.Token
		op.Input = in
		op.Return = e.T
		res := string(e.Type)
		if e.Type == history.Info {
			res = "unknown"
			op.Return = math.MaxInt64 // may take effect any time after the call
		}
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
				op.Output = linOutput{Result: "unknown"}
				l.add(l.pkey[proc], *op)
				delete(l.pending, proc)
			}
		}
	}
}

func (l *LinOps) lost(proc, key string, t int64) {
	id := l.client(proc)
	l.add(key, porcupine.Operation{ClientId: id, Input: linInput{Kind: history.OpLost, Client: id, Proc: proc}, Call: t, Return: t, Output: linOutput{Result: "ok"}})
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

// CheckLinearizable runs porcupine over each key, at most timeout per key.
func (l *LinOps) CheckLinearizable(fenced bool, timeout time.Duration) LinResult {
	// Operations still open at the end never returned: unknown outcome.
	for proc, op := range l.pending {
		op.Return = math.MaxInt64
		op.Output = linOutput{Result: "unknown"}
		l.add(l.pkey[proc], *op)
	}
	l.pending = map[string]*porcupine.Operation{}
	res := LinResult{Verdict: Ok, Keys: map[string]Verdict{}, Info: map[string]porcupine.LinearizationInfo{}, Model: newLockModel(false)}
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
		if l.over[k] {
			v = Unknown
		}
		res.Keys[k] = v
		if v != Ok {
			res.Info[k] = info
		}
		res.Verdict = worse(res.Verdict, v)
		if fenced {
			fv, _ := check(newLockModel(true), ops)
			if l.over[k] {
				fv = Unknown
			}
			res.Fenced = worse(res.Fenced, fv)
		}
	}
	return res
}

// ClientNames maps porcupine client ids back to client names.
func (l *LinOps) ClientNames() []string { return l.names }
