package checker

import (
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockbench/lockbench/history"
)

// This file holds what settles a window without a search (MODEL §8): one
// order to try when nothing overlaps, and proofs that no order can hold.

// sequential checks a window whose operations do not overlap in time and
// all have known outcomes: there is one order to try. It reports false
// when the window is not of that shape (two operations that touch, one's
// completion at the instant of the next one's invoke, may go either way:
// porcupine decides those).
func sequential(ops []porcupine.Operation, fenced bool, lease int64, startMax uint64) (Verdict, bool) {
	var last int64 = math.MinInt64
	for _, op := range ops {
		if op.Call <= last || op.Return == math.MaxInt64 || op.Output.(linOutput).Result == "unknown" {
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

// describeTimeout bounds the search that only draws a violation a cheaper
// proof already found.
const describeTimeout = time.Second

// grantProof is a proof, cheaper than any search, that a window is not
// linearizable under MODEL §8: an ok acquire B that was invoked after
// another client's ok acquire A had completed, and completed before A's
// grant could be taken back (its E, renewed by every ok extension that
// completed before B was invoked, or its R), with no release of A's client
// in between that could have freed it, and no grant anew to A's client that
// could have replaced it. Every order then puts B's grant
// while A's is held and not expirable.
func grantProof(ops []*linOp, lease int64) bool {
	var grants []*linOp
	for _, o := range ops {
		if o.kind == history.OpAcquire && o.result == "ok" {
			grants = append(grants, o)
		}
	}
	for _, b := range grants {
		// The latest grant of another client completed before b's call.
		var a *linOp
		for _, g := range grants {
			if g.client != b.client && g.ret < b.call && (a == nil || g.ret > a.ret) {
				a = g
			}
		}
		if a == nil {
			continue
		}
		from, freed := a.call, false
		for _, o := range ops {
			if o.client != a.client || o.ret <= a.call || o.call > b.ret {
				continue
			}
			switch {
			case o.kind == history.OpRelease:
				freed = true // it may have freed the key before b
			case o.kind == history.OpAcquire && o != a:
				// a grant anew to A's client (a re-entrant acquire, or one
				// after a release never sent, which is no operation of the
				// service) replaces A's grant, and with it what may take
				// it back (its R: that hold's death, say)
				freed = true
			case o.kind == history.OpExtend && o.result == "ok" && o.ret < b.call:
				from = max(from, o.call) // it surely renewed E before b
			}
		}
		if freed {
			continue
		}
		until := never
		if lease > 0 {
			until = from + lease
		}
		if a.h != nil {
			until = min(until, a.h.revokeFrom())
		}
		if b.ret < until {
			return true
		}
	}
	return false
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
	sort.SliceStable(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	byCall := append([]*linOp(nil), acq...)
	sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
	highest, j := before, 0
	for _, b := range byCall {
		for j < len(byRet) && byRet[j].ret < b.call {
			highest = max(highest, byRet[j].token)
			j++
		}
		if b.token <= highest {
			return true
		}
	}
	return false
}
