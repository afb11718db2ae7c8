package scenario

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"go.yaml.in/yaml/v3"
)

// MaxFaults bounds the faults of one case, fixed and drawn together: a
// nemesis whose gaps are tiny against the case's duration would otherwise
// expand into millions of faults.
const MaxFaults = 1000

// Least gap and window of a nemesis: finer than this, the harness cannot
// apply and observe a fault before the next one.
const (
	minNemesisEvery = 10 * time.Millisecond
	minNemesisFor   = time.Millisecond
)

// nemesisDoc draws faults from a seeded random schedule: starting at Start,
// every Every (a random gap between two fault starts), one of Faults, for a
// random For. The same seed and scenario give the same schedule.
type nemesisDoc struct {
	Start  config.Duration `yaml:"start"`
	Every  rangeDoc        `yaml:"every"`
	For    rangeDoc        `yaml:"for"`
	Faults []yaml.Node     `yaml:"faults"`
}

type rangeDoc struct {
	Min config.Duration `yaml:"min"`
	Max config.Duration `yaml:"max"`
}

func (r rangeDoc) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min.D()
	}
	return r.Min.D() + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// nemesis is what a case needs to redraw its schedule for a new seed.
type nemesis struct {
	doc   *nemesisDoc
	where string
	line  int
	sc    scheduleCtx
	fixed []*Fault
}

// validateNemesis returns the field and the problem, or "" when valid.
func validateNemesis(n *nemesisDoc) (string, string) {
	switch {
	case len(n.Faults) == 0:
		return "faults", "the nemesis has no faults to draw from"
	case n.Every.Min < config.Duration(minNemesisEvery) || n.Every.Max < n.Every.Min:
		return "every", fmt.Sprintf("need %s <= min <= max", minNemesisEvery)
	case n.For.Min < config.Duration(minNemesisFor) || n.For.Max < n.For.Min:
		return "for", fmt.Sprintf("need %s <= min <= max", minNemesisFor)
	case n.Start < 0:
		return "start", "must not be negative"
	}
	return "", ""
}

// withWindow returns a copy of a fault template with at, for and name set.
func withWindow(tmpl *yaml.Node, at, dur time.Duration, name string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Line: tmpl.Line}
	for k := 0; k+1 < len(tmpl.Content); k += 2 {
		switch tmpl.Content[k].Value {
		case "at", "for", "name":
			continue
		}
		n.Content = append(n.Content, tmpl.Content[k], tmpl.Content[k+1])
	}
	scalar := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Line: tmpl.Line} }
	n.Content = append(n.Content, scalar("at"), scalar(at.String()), scalar("for"), scalar(dur.String()))
	if name != "" {
		n.Content = append(n.Content, scalar("name"), scalar(name))
	}
	return n
}

// Reseed draws every nemesis schedule again from seed (the scenario's, or
// `bench run --seed`). Each case draws from its own stream, keyed by its
// name, so trials get different schedules and adding a case does not change
// another's. A schedule is bounded: more than MaxFaults faults in one case
// is an error naming the nemesis, not minutes of work.
func (s *Scenario) Reseed(seed int64) error {
	s.Seed = seed
	errs := &Errors{Path: s.Path}
	for _, c := range s.Cases {
		c.spread(seed)
	}
	for _, c := range s.Cases {
		if c.nemesis == nil {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(c.Name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		nd := c.nemesis.doc
		sc := c.nemesis.sc
		sc.errs = errs
		out := append([]*Fault(nil), c.nemesis.fixed...)
		at := nd.Start.D()
		for i := 1; ; i++ {
			tmpl := rng.IntN(len(nd.Faults))
			dur := nd.For.draw(rng)
			if at+dur >= sc.runFor {
				break
			}
			if len(out) >= MaxFaults {
				errs.add(c.nemesis.line, c.nemesis.where+".nemesis", "draws more than %d faults in the case's %s: raise every.min (now %s)", MaxFaults, sc.runFor, nd.Every.Min)
				break
			}
			f := sc.parseFault(c.nemesis.where+".nemesis", tmpl, withWindow(&nd.Faults[tmpl], at, dur, fmt.Sprintf("nemesis-%d", i)))
			if f == nil {
				break
			}
			out = append(out, f)
			at += max(dur, nd.Every.draw(rng))
		}
		checkOverlaps(errs, c.nemesis.line, c.nemesis.where, out)
		c.Faults = out
	}
	if len(errs.List) > 0 {
		return errs
	}
	return nil
}
