package checker_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

// TestZombieIsLeastOverWorlds: MODEL §6 says a hold's zombie time runs
// from the latest instant its lease may run out in some allowed world (A1,
// A7), and gives a way to find it. This searches the worlds themselves, on
// a grid of milliseconds, for random holds with ok, timed-out and unsent
// extensions: every landing instant of every renewal (an ok one inside
// its window, one of unknown outcome at any instant after its invoke, or
// never; one never sent never), each only while the grant is in force,
// the ok ones required to. The checker must find the latest expiry over
// them. Times are multiples of 5 ms and the lease 17 ms, so that no
// expiry ties an invoke (a tie decides nothing, §2).
func TestZombieIsLeastOverWorlds(t *testing.T) {
	const lease, end, horizon = 17, 400, 220
	r := rand.New(rand.NewPCG(7, 36))
	checked := 0
	for n := 0; n < 400; n++ {
		type ext struct {
			a, c int
			out  history.Type
		}
		var exts []ext
		at := 0
		for i := r.IntN(4); i > 0; i-- {
			a := at + 5*(1+r.IntN(4))
			c := a + 5*(1+r.IntN(2))
			exts = append(exts, ext{a, c, []history.Type{history.OK, history.Info, history.Unsent}[r.IntN(3)]})
			at = c
		}
		// brute force: the acquire lands at its completion, 0 (later is
		// never worse); each extension picks a landing instant or never
		best := -1
		var pick func(i int, land []int)
		pick = func(i int, land []int) {
			if i == len(exts) {
				e := lease
				order := make([]int, 0, len(land))
				for j, x := range land {
					if x >= 0 {
						order = append(order, j)
					}
				}
				for k := 1; k < len(order); k++ { // by landing instant
					for m := k; m > 0 && land[order[m]] < land[order[m-1]]; m-- {
						order[m], order[m-1] = order[m-1], order[m]
					}
				}
				for _, j := range order {
					x := land[j]
					if x > e {
						return // not in force: this world is not allowed
					}
					e = x + lease
				}
				best = max(best, e)
				return
			}
			x := exts[i]
			switch x.out {
			case history.OK:
				for l := x.a; l <= x.c; l++ {
					pick(i+1, append(land, l))
				}
			case history.Info:
				pick(i+1, append(land, -1))
				for l := x.a; l <= horizon; l++ {
					pick(i+1, append(land, l))
				}
			default:
				pick(i+1, append(land, -1))
			}
		}
		pick(0, nil)
		if best < 0 {
			continue // no allowed world: the service's word stands alone, not searched here
		}
		ms := int64(1e6)
		c := checker.NewCase(history.CaseMeta{Name: "z", Duration: 500 * ms, LeaseNs: lease * ms}, 0)
		add := func(t int, typ history.Type, f string) {
			c.Add(&history.Event{T: int64(t) * ms, Type: typ, F: f, Proc: "i1c0", Key: "k"})
		}
		add(0, history.Invoke, history.OpAcquire)
		add(0, history.OK, history.OpAcquire)
		desc := ""
		for _, x := range exts {
			add(x.a, history.Invoke, history.OpExtend)
			add(x.c, x.out, history.OpExtend)
			desc += fmt.Sprintf(" %s[%d,%d]", x.out, x.a, x.c)
		}
		add(end, history.Invoke, history.OpRelease)
		add(end+1, history.Fail, history.OpRelease)
		c.Add(&history.Event{T: 500 * ms, Type: history.Mark, F: history.MarkCaseStop})
		c.Add(&history.Event{T: 500 * ms, Type: history.Mark, F: history.MarkCaseEnd})
		res := c.Result()
		if want := float64(end - best); res.Zombies != 1 || res.ZombieMaxMs != want {
			t.Errorf("extensions%s: zombie %d, %v ms; the latest expiry over the worlds is %d ms: want %v ms", desc, res.Zombies, res.ZombieMaxMs, best, want)
		}
		checked++
	}
	if checked < 200 {
		t.Errorf("only %d holds had an allowed world", checked)
	}
}
