package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// unitSeeds: how many seeds the unit tests read (fewer under -short: make
// test's -race pass; the pass without it reads them all).
func unitSeeds() uint64 {
	if testing.Short() {
		return 20
	}
	return 100
}

var simCache sync.Map

// simulated is Simulate, once per seed for all the unit tests (they only
// read the run, or a shallow copy of it).
func simulated(s uint64) *Run {
	if r, ok := simCache.Load(s); ok {
		return r.(*Run)
	}
	r := Simulate(s)
	simCache.Store(s, r)
	return r
}

// A service that never deviated from a lease lock must have a witness
// linearization, and no proof against it: the simulator's claims of "ok"
// and "violation" must never meet.
func TestWitnessOfCorrectService(t *testing.T) {
	for s := uint64(1); s <= unitSeeds(); s++ {
		r := simulated(s)
		for _, withJournal := range []bool{false, true} {
			cut := r.visible(withJournal)
			for i, cr0 := range r.Cases {
				if cr0.startIdx >= cut {
					break
				}
				for _, cr := range cr0.views() {
					ct := cr.truth(r.Events, cut, i)
					for _, n := range ct.Notes {
						if strings.Contains(n, "CONTRADICTION") {
							t.Errorf("seed %d case %d: %s", s, i, n)
						}
					}
					if cr.misbehaved || len(cr.backdated) > 0 || len(cr.strayComps) > 0 {
						continue
					}
					for _, n := range ct.Notes {
						if strings.HasPrefix(n, "witness") || strings.HasPrefix(n, "proof") || strings.HasPrefix(n, "fenced proof") {
							t.Errorf("seed %d case %d (%s): %s", s, i, cr.cfg.variant, n)
						}
					}
				}
			}
		}
	}
}

// newTestWorld builds a world of two instances of one client each, for
// driving the service by hand.
func newTestWorld(variant string, lease int64) (*world, []*client) {
	cfg := &caseConfig{variant: variant, lease: lease, keys: 1, servers: 1, instances: 2, clientsPer: 1, fenced: true, opTimeout: 100e6}
	r := &Run{lastT: -1}
	w := &world{rng: rand.New(rand.NewPCG(1, 2)), run: r, cfg: cfg}
	w.cr = &caseRec{cfg: cfg}
	w.svc = &service{w: w, variant: variant, lease: lease, fenced: true, noExpiry: variant == NoExpiry, misP: 1,
		locks: map[string]*lockEntry{}, counter: map[string]uint64{}}
	var cs []*client
	for n := 1; n <= 2; n++ {
		in := &instance{w: w, n: n, rec: &instRec{n: n, deathIdx: -1, crashIdx: -1}}
		c := &client{w: w, name: fmt.Sprintf("i%dc0", n), in: in, lastGrant: map[string]int64{}}
		in.clients = []*client{c}
		w.insts = append(w.insts, in)
		w.clients = append(w.clients, c)
		cs = append(cs, c)
	}
	return w, cs
}

func op(kind string) *opRec { return &opRec{kind: kind, key: "k0"} }

func TestServiceLeaseLock(t *testing.T) {
	w, cs := newTestWorld(Correct, 1000)
	a, b := cs[0], cs[1]
	if r, g := w.svc.acquire(a, op("acquire"), 1); r != "granted" || g.token != 1 {
		t.Fatalf("first acquire: %s %v", r, g)
	}
	if r, _ := w.svc.acquire(b, op("acquire"), 1); r != "refused" {
		t.Fatalf("acquire of a held key: %s", r)
	}
	if r := w.svc.release(b, op("release")); r != "notheld" {
		t.Fatalf("release by a non-holder: %s", r)
	}
	if r := w.svc.wrongRelease(a, op("release-wrong-token")); r != "notheld" {
		t.Fatalf("wrong-token release: %s", r)
	}
	if r := w.svc.extend(b, op("extend")); r != "notextended" {
		t.Fatalf("extend by a non-holder: %s", r)
	}
	w.now = 999
	if r, _ := w.svc.acquire(b, op("acquire"), 1); r != "refused" {
		t.Fatalf("acquire before the lease ran out: %s", r)
	}
	w.now = 1000 // grants expire at or after invoke + lease
	if r, g := w.svc.acquire(b, op("acquire"), 1); r != "granted" || g.token != 2 {
		t.Fatalf("acquire after the lease ran out: %s %v", r, g)
	}
	if r := w.svc.release(a, op("release")); r != "notheld" {
		t.Fatalf("release of an expired lease: %s", r)
	}
	if r := w.svc.extend(b, op("extend")); r != "extended" {
		t.Fatalf("extend by the holder: %s", r)
	}
	w.now = 1999
	if r, _ := w.svc.acquire(a, op("acquire"), 1); r != "refused" {
		t.Fatalf("acquire before an extended lease ran out: %s", r)
	}
	if r := w.svc.release(b, op("release")); r != "released" {
		t.Fatalf("release by the holder: %s", r)
	}
	if r, g := w.svc.acquire(a, op("acquire"), 1); r != "granted" || g.token != 3 {
		t.Fatalf("acquire of a released key: %s %v", r, g)
	}
	// re-entrant: the holder's acquire is granted again, with a new token
	if r, g := w.svc.acquire(a, op("acquire"), 2); r != "granted" || g.token != 4 {
		t.Fatalf("re-entrant acquire: %s %v", r, g)
	}
}

func TestServiceNoLease(t *testing.T) {
	w, cs := newTestWorld(Correct, 0)
	w.svc.acquire(cs[0], op("acquire"), 1)
	w.now = 1e15
	if r, _ := w.svc.acquire(cs[1], op("acquire"), 1); r != "refused" {
		t.Fatalf("a lock without a lease expired: %s", r)
	}
	w.svc.freeInstance(1) // the holder's connections closed
	if r, _ := w.svc.acquire(cs[1], op("acquire"), 1); r != "granted" {
		t.Fatalf("a dead holder's lock was not freed: %s", r)
	}
}

func TestBrokenVariants(t *testing.T) {
	w, cs := newTestWorld(GrantWhileHeld, 1000)
	w.svc.acquire(cs[0], op("acquire"), 1)
	if r, _ := w.svc.acquire(cs[1], op("acquire"), 1); r != "granted" || !w.cr.misbehaved {
		t.Errorf("grant-while-held did not grant a held key: %s", r)
	}
	w, cs = newTestWorld(NoExpiry, 1000)
	w.svc.acquire(cs[0], op("acquire"), 1)
	w.now = 1e12
	if r, _ := w.svc.acquire(cs[1], op("acquire"), 1); r != "refused" {
		t.Errorf("no-expiry freed an expired lease: %s", r)
	}
	w, cs = newTestWorld(ReleaseOther, 1000)
	w.svc.acquire(cs[0], op("acquire"), 1)
	if r := w.svc.release(cs[1], op("release")); r != "released" || !w.cr.misbehaved {
		t.Errorf("release-other refused a non-holder's release: %s", r)
	}
	w, cs = newTestWorld(TokenReset, 1000)
	w.svc.acquire(cs[0], op("acquire"), 1)
	w.svc.release(cs[0], op("release"))
	w.svc.acquire(cs[0], op("acquire"), 1)
	w.svc.release(cs[0], op("release"))
	w.svc.resetTokens("srv-1")
	if _, g := w.svc.acquire(cs[1], op("acquire"), 1); g.token > 2 {
		t.Errorf("token-reset: token %d after the reset, not back", g.token)
	}
}

func TestDeterministic(t *testing.T) {
	for _, s := range []uint64{1, 7, 99} {
		h1, t1 := Simulate(s).Files()
		h2, t2 := Simulate(s).Files()
		if !bytes.Equal(h1, h2) || !bytes.Equal(t1, t2) {
			t.Errorf("seed %d: two runs differ", s)
		}
		a, _ := json.Marshal(Simulate(s).Truth(true))
		b, _ := json.Marshal(Simulate(s).Truth(true))
		if !bytes.Equal(a, b) {
			t.Errorf("seed %d: two truths differ", s)
		}
	}
}

// The hand-written encoder writes JSON that a standard decoder reads back
// to the same values.
func TestEncoder(t *testing.T) {
	e := &Event{T: 12, Type: "info", F: "acquire", Proc: "i1c0", Key: "k\"0\\\n\t\x01", Token: 1<<64 - 1, Err: "é ok", Lost: true,
		Fenced: "stale", Reuse: true, Late: true, Fault: "f", Target: "link:x@instance-1", Observed: "o", Intended: 5, Meta: []byte(`{"a":1}`)}
	var got map[string]any
	d := json.NewDecoder(bytes.NewReader(e.AppendJSON(nil)))
	d.UseNumber()
	if err := d.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"t": "12", "type": "info", "f": "acquire", "proc": "i1c0", "key": "k\"0\\\n\t\x01", "token": "18446744073709551615",
		"err": "é ok", "lost": "true", "fenced": "stale", "reuse": "true", "late": "true", "fault": "f", "target": "link:x@instance-1", "observed": "o", "intended": "5", "meta": "map[a:1]"}
	for k, v := range want {
		if fmt.Sprint(got[k]) != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields: %v", got)
	}
	m := CaseMeta{Name: "n", Faults: []FaultSpec{{Name: "p", Type: "partition", Target: "link:a", At: 1, For: 2, Group: "g"}}, Expect: Expect{Violations: bp(true), MaxGapNs: 3}}
	var mm map[string]any
	if err := json.Unmarshal(m.encode(), &mm); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(mm["faults"]) != "[map[at_ns:1 for_ns:2 group:g name:p target:link:a type:partition]]" || fmt.Sprint(mm["expect"]) != "map[max_gap_ns:3 violations:true]" {
		t.Errorf("meta: %v", mm)
	}
}
