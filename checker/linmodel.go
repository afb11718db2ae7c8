package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/lockbench/lockbench/history"
)

// This file is MODEL §8's lease lock as porcupine sees it: an operation's
// input and output, the lock's state, and the step from one state to the
// states an operation can leave it in.

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
	// An outcome that changes nothing, and whose legality does not depend
	// on the instant, needs no instant at all: it leaves the state as it
	// found it, so that orders that differ only in where such operations
	// stand reach one state (porcupine then prunes them as one).
	same := func() []lockState { return []lockState{s} }
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
			return same()
		default: // unknown: it took effect (token unknown) or not
			if p < 0 {
				return same()
			}
			return []lockState{s, at(n, p)}
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
				return same()
			case px >= 0:
				return []lockState{at(free, px)} // its grant ran out first
			}
			return nil
		default:
			if mine {
				return []lockState{s, at(after, pe)}
			}
			return same()
		}
	}
	return nil
}

// hash mixes every field of s (FNV-1a over their bits): equal states hash
// alike, as porcupine requires.
func (s lockState) hash() uint64 {
	h := uint64(14695981039346656037)
	for _, v := range [...]uint64{uint64(int64(s.Holder)), uint64(s.Expiry), uint64(s.Revoke), s.Max, uint64(s.Now)} {
		for i := 0; i < 8; i++ {
			h ^= (v >> (8 * i)) & 0xff
			h *= 1099511628211
		}
	}
	return h
}

// newLockModel is step as a porcupine model; start gives the state a
// window starts from (a free lock, with the highest token granted so far).
//
// The model's state is the set of lock states the operations so far can
// have left (an unknown outcome took effect or not), kept canonical: in
// order, without duplicates, and without a state another one dominates.
// States equal but for Now are ordered by it: step is monotone in Now (an
// earlier instant only widens where the next operation may take effect,
// and every state it reaches is reached from the earlier one at an instant
// no later), so the earlier one allows everything the later one does, and
// the later one is dropped. Without that, a few unknown outcomes in a small
// history multiplied states that differ only in when they took effect,
// and the search spent its whole budget (X1's 212 events: 40 s in bench
// table, its verdict unknown).
func newLockModel(fenced bool, lease int64, start func() uint64) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation { return [][]porcupine.Operation{h} },
		Init:      func() any { return []lockState{{Holder: -1, Max: start()}} },
		Step: func(state, input, output any) (bool, any) {
			var next []lockState
			for _, st := range state.([]lockState) {
				next = append(next, step(st, input.(linInput), output.(linOutput), fenced, lease)...)
			}
			next = canonical(next)
			return len(next) > 0, next
		},
		Equal: func(a, b any) bool { return slices.Equal(a.([]lockState), b.([]lockState)) },
		// Hash lets porcupine's cache compare a state only with those of
		// equal hash.
		Hash: func(a any) uint64 {
			h := uint64(14695981039346656037)
			for _, st := range a.([]lockState) {
				h = (h ^ st.hash()) * 1099511628211
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			tok := ""
			if in.Token > 0 {
				tok = fmt.Sprintf(" token %d", in.Token)
			}
			return fmt.Sprintf("%s %s%s -> %s", in.Proc, in.Kind, tok, out.Result)
		},
		DescribeState: func(state any) string {
			var parts []string
			for _, s := range state.([]lockState) {
				if s.Holder == -1 {
					parts = append(parts, fmt.Sprintf("free (max token %d)", s.Max))
				} else {
					parts = append(parts, fmt.Sprintf("held by client %d (max token %d)", s.Holder, s.Max))
				}
			}
			if len(parts) == 1 {
				return parts[0]
			}
			return "{" + strings.Join(parts, ", ") + "}"
		},
	}
}

// canonical sorts states and drops duplicates and dominated states (equal
// but for a later Now), in place.
func canonical(states []lockState) []lockState {
	if len(states) < 2 {
		return states
	}
	slices.SortFunc(states, func(a, b lockState) int {
		return cmp.Or(cmp.Compare(a.Holder, b.Holder), cmp.Compare(a.Expiry, b.Expiry),
			cmp.Compare(a.Revoke, b.Revoke), cmp.Compare(a.Max, b.Max), cmp.Compare(a.Now, b.Now))
	})
	out := states[:1]
	for _, st := range states[1:] {
		last := out[len(out)-1]
		if last.Holder == st.Holder && last.Expiry == st.Expiry && last.Revoke == st.Revoke && last.Max == st.Max {
			continue // last.Now <= st.Now: st is dominated (or a duplicate)
		}
		out = append(out, st)
	}
	return out
}
