package sim

import (
	"fmt"
	"strings"
)

func (f *FaultTruth) anyf(field, why string) {
	if f.Any == nil {
		f.Any = map[string]string{}
	}
	f.Any[field] = why
}

func (cr *caseRec) tags() string {
	c := cr.cfg
	tags := []string{c.variant}
	if c.problem != "" {
		tags = append(tags, "problem="+c.problem)
	}
	if c.lease == 0 {
		tags = append(tags, "no-lease")
	}
	if !c.fenced {
		tags = append(tags, "unfenced")
	}
	if c.lanes > 0 {
		tags = append(tags, fmt.Sprintf("lanes=%d", c.lanes))
	}
	if c.tick > 0 {
		tags = append(tags, fmt.Sprintf("tick=%dus", c.tick/1000))
	}
	if c.queue {
		tags = append(tags, "queue")
	}
	if c.expect.Measure {
		tags = append(tags, "measure")
	}
	if c.sweep != nil {
		tags = append(tags, "sweep")
	}
	if c.outsideInst {
		tags = append(tags, "outside-instance")
	}
	if c.foreignKey {
		tags = append(tags, "foreign-key")
	}
	seen := map[string]bool{}
	for _, f := range c.faults {
		s := f.kind
		if f.outcome != foNormal {
			s += "/" + f.outcome
		}
		if f.spec.Group != "" {
			s += "/group"
		}
		if f.late {
			s += "/late"
		}
		if !seen[s] {
			tags = append(tags, s)
			seen[s] = true
		}
	}
	if c.dyingMax > 0 {
		tags = append(tags, "posthumous")
	}
	return strings.Join(tags, " ")
}

// --- §10 groups -----------------------------------------------------------
