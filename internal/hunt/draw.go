package hunt

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockbench/lockbench/checker"
)

// Space is what a hunt draws its trials from.
type Space struct {
	// Kinds are the fault types drawn, with their weights.
	Kinds []Weighted
	// Targets are the targets drawn (roles such as holder, or one of a
	// trial's own instances), with their weights.
	Targets []Weighted
	// Windows are the fault windows drawn, in multiples of the lease.
	Windows []float64
	// MaxFaults bounds the faults of one trial (1 or more): each trial
	// has 1..MaxFaults, fewer more often.
	MaxFaults int
	// Lease is the lock's lease (its workload's ttl for a lock without
	// one): windows and start times are drawn in multiples of it.
	Lease time.Duration
	// Warmup is the least time before a fault: the clients are under way.
	Warmup time.Duration
}

// Weighted is a value drawn with a weight.
type Weighted struct {
	Value  string
	Weight int
}

// DefaultWindows are the windows a hunt draws, in leases: from well
// inside one to four of them (Consul's session outlives twice its TTL and
// then keeps its lock delay).
var DefaultWindows = []float64{0.25, 0.5, 1, 2, 4}

// claim is what a fault takes over of its target: two faults with one
// claim never overlap on a trial's instances (validation refuses it, and
// a role may resolve to any of them). Faults that stop or kill the
// process all claim it; the cuts all claim its packets; the others claim
// what their own type does.
func claim(kind string) string {
	switch kind {
	case "pause", "kill", "power-loss":
		return "process"
	case "isolate", "loss", "split", "one-way":
		return "cut"
	}
	return kind
}

// Validate says what is wrong with the space.
func (s Space) Validate() error {
	var bad []string
	if len(s.Kinds) == 0 {
		bad = append(bad, "no fault kind")
	}
	if len(s.Targets) == 0 {
		bad = append(bad, "no target")
	}
	if len(s.Windows) == 0 {
		bad = append(bad, "no window")
	}
	for _, w := range s.Windows {
		if w <= 0 {
			bad = append(bad, fmt.Sprintf("window %g× the lease is not positive", w))
		}
	}
	if s.MaxFaults < 1 {
		bad = append(bad, fmt.Sprintf("max faults %d: want 1 or more", s.MaxFaults))
	}
	if s.Lease <= 0 {
		bad = append(bad, "no lease to scale the windows by")
	}
	if len(bad) > 0 {
		return fmt.Errorf("fault space: %s", strings.Join(bad, "; "))
	}
	return nil
}

// Draw draws one trial's faults. The second and later faults start
// within a lease of the previous one's window, so that they overlap it
// or follow it closely (the interesting combinations); two faults that
// take one thing over are moved apart, and a fault after a kill aims at
// a role, not at an instance that may be the dead one.
// Faults with one claim (see claim) are moved apart.
func (s Space) Draw(rng *rand.Rand) []Fault {
	n := 1
	for n < s.MaxFaults && rng.IntN(2) == 0 {
		n++
	}
	lease := float64(s.Lease)
	var out []Fault
	killed := false
	for i := 0; i < n; i++ {
		f := Fault{Type: pick(rng, s.Kinds), Target: pick(rng, s.Targets)}
		f.For = time.Duration(lease * s.Windows[rng.IntN(len(s.Windows))])
		if i == 0 {
			f.At = s.Warmup + time.Duration(rng.Float64()*lease)
		} else {
			prev := out[i-1]
			f.At = max(s.Warmup, prev.At+time.Duration(rng.Float64()*float64(prev.For+s.Lease)))
			for _, g := range out {
				if claim(g.Type) == claim(f.Type) && f.At < g.End() && g.At < f.End() {
					f.At = g.End() + s.Lease/4
				}
			}
		}
		if killed && strings.HasPrefix(f.Target, "instance-") {
			f.Target = "holder"
		}
		if f.Type == "kill" {
			killed = true
		}
		f.At, f.For = f.At.Round(time.Millisecond), f.For.Round(time.Millisecond)
		out = append(out, f)
	}
	return out
}

// pick draws one value by weight.
func pick(rng *rand.Rand, ws []Weighted) string {
	total := 0
	for _, w := range ws {
		total += max(0, w.Weight)
	}
	if total == 0 {
		return ws[rng.IntN(len(ws))].Value
	}
	x := rng.IntN(total)
	for _, w := range ws {
		if x < max(0, w.Weight) {
			return w.Value
		}
		x -= max(0, w.Weight)
	}
	return ws[len(ws)-1].Value
}

// Tail is how long a case goes on after its last fault's window: long
// enough to see a paused holder's late write and whether the lock comes
// back (a lease, at most 20 s), and more than the checker needs to call
// a lock that never came back a verdict rather than a guess
// (checker.MinEvidence, and half a second for the workers' stop).
func Tail(lease time.Duration) time.Duration {
	return min(max(lease, checker.MinEvidence+500*time.Millisecond), 20*time.Second)
}

// Length is the case length that holds every trial's faults and the
// tail after the last of them.
func Length(trials [][]Fault, lease time.Duration) time.Duration {
	end := time.Duration(0)
	for _, fs := range trials {
		for _, f := range fs {
			end = max(end, f.End())
		}
	}
	return (end + Tail(lease)).Round(100 * time.Millisecond)
}
