package hunt

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/realized"
)

// Candidate is one step that makes a schedule smaller, and what it did.
type Candidate struct {
	Step     string
	Schedule Schedule
}

// MinWindow is the shortest window shrinking tries: below it a fault
// barely acts (a pause shorter than a scheduler tick).
const MinWindow = 50 * time.Millisecond

// roleOf is the role an instance played in a phase: what a fault that
// hit it then was really aimed at.
var roleOf = map[string]string{realized.PhaseHolding: "holder", realized.PhaseExtending: "holder", realized.PhaseWaiting: "a-waiter"}

// Candidates returns the one-step reductions of s, in this order: aim a
// fault that hit an instance at the role it played (instance-1 while it
// held the lock becomes holder: the cause, not the accident of which
// instance held), a shorter case (the first reduction: it makes every
// later run shorter), drop a fault, halve a window, fewer instances,
// fewer clients. Each keeps the others' times (faults stay
// where the failure found them). lease scales the case's tail.
func Candidates(s Schedule, lease time.Duration) []Candidate {
	var out []Candidate
	for i, f := range s.Faults {
		if role := roleOf[f.Phase]; role != "" && strings.HasPrefix(f.Target, "instance-") {
			c := s.clone()
			c.Faults[i].Target = role
			out = append(out, Candidate{fmt.Sprintf("aim fault %d at the %s (%s was it when the fault began)", i+1, role, f.Target), c})
		}
	}
	if d := Length([][]Fault{s.Faults}, lease); d < s.Duration {
		c := s.clone()
		c.Duration = d
		out = append(out, Candidate{fmt.Sprintf("case %s → %s", round(s.Duration), round(d)), c})
	}
	for i := range s.Faults {
		c := s.clone()
		c.Faults = append(c.Faults[:i:i], c.Faults[i+1:]...)
		c.Duration = s.fitDuration(c.Faults, lease)
		out = append(out, Candidate{fmt.Sprintf("drop fault %d (%s)", i+1, s.Faults[i]), c})
	}
	for i, f := range s.Faults {
		if f.For/2 < MinWindow || (f.Type == "kill" && onInstance(f.Target)) {
			continue // a killed instance stays dead: its window changes nothing
		}
		c := s.clone()
		c.Faults[i].For = (f.For / 2).Round(time.Millisecond)
		c.Duration = s.fitDuration(c.Faults, lease)
		out = append(out, Candidate{fmt.Sprintf("halve fault %d's window (%s → %s)", i+1, round(f.For), round(c.Faults[i].For)), c})
	}
	if s.Instances > 1 {
		c := s.clone()
		c.Instances--
		out = append(out, Candidate{fmt.Sprintf("instances %d → %d", s.Instances, c.Instances), c})
	}
	if s.Clients > 1 {
		c := s.clone()
		c.Clients--
		out = append(out, Candidate{fmt.Sprintf("clients per instance %d → %d", s.Clients, c.Clients), c})
	}
	return out
}

// onInstance says a target is one of a trial's instances or a role that
// resolves to one.
func onInstance(target string) bool {
	for _, p := range []string{"instance-", "holder", "a-waiter"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// fitDuration keeps the case's length unless the faults now end earlier
// than it needs: it never grows a case.
func (s Schedule) fitDuration(fs []Fault, lease time.Duration) time.Duration {
	return min(s.Duration, max(Length([][]Fault{fs}, lease), time.Second))
}

func (s Schedule) clone() Schedule {
	c := s
	c.Faults = append([]Fault(nil), s.Faults...)
	return c
}

// Step is one shrinking step tried: the candidate, how often the failure
// recurred under it, and whether it was kept.
type Step struct {
	Round    int    `json:"round"`
	Step     string `json:"step"`
	Schedule string `json:"schedule"`
	Hits     int    `json:"hits"`
	Of       int    `json:"of"`
	Invalid  int    `json:"invalid"`
	Kept     bool   `json:"kept"`
}
