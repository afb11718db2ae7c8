// Package hunt searches a lock for failures: it draws trials from a seed
// over a space of faults (kinds, targets by role, windows in multiples of
// the lease, overlaps), runs them side by side within a budget, keeps a
// table of what was covered (fault kind × the lock's phase × window),
// confirms a failure only when it recurs in k of n replays of its
// realized schedule, and shrinks the schedule while it still recurs. It
// runs scenarios through a Runner, so that its logic is tested without
// servers; bench hunt and bench replay give it the real one.
package hunt

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Fault is one fault of a schedule: what bench writes in a scenario's
// faults list. At is since the case's start.
type Fault struct {
	Type    string         `json:"type"`
	Target  string         `json:"target"`
	At      time.Duration  `json:"at"`
	For     time.Duration  `json:"for"`
	Options map[string]any `json:"options,omitempty"`
	// Phase is the lock's phase when the fault began, when it ran (from
	// realized.json): shrinking aims a fault that hit an instance in the
	// holding or waiting phase at that role instead.
	Phase string `json:"phase,omitempty"`
}

// End is when the fault's window ends.
func (f Fault) End() time.Duration { return f.At + f.For }

// String says the fault the way a progress line does: "pause holder at
// 1.2s for 2s".
func (f Fault) String() string {
	return fmt.Sprintf("%s %s at %s for %s", f.Type, f.Target, round(f.At), round(f.For))
}

// Schedule is one trial's schedule: the workload's size, the case's
// length, the clients' plan and the faults. Everything else of the case
// (backend, options, the rest of the workload) is the Template's.
type Schedule struct {
	Instances int           `json:"instances"`
	Clients   int           `json:"clients"`
	Duration  time.Duration `json:"duration"`
	PlanSeed  uint64        `json:"plan_seed,omitempty"`
	Faults    []Fault       `json:"faults"`
}

// Size orders schedules for shrinking: fewer faults first, then shorter
// windows, fewer clients, a shorter case.
func (s Schedule) Size() (faults int, window time.Duration, clients int, length time.Duration) {
	for _, f := range s.Faults {
		window += f.For
	}
	return len(s.Faults), window, s.Instances * s.Clients, s.Duration
}

// String lists the schedule on one line.
func (s Schedule) String() string {
	var fs []string
	for _, f := range s.Faults {
		fs = append(fs, f.String())
	}
	if len(fs) == 0 {
		fs = []string{"no fault"}
	}
	return fmt.Sprintf("%d×%d clients, %s: %s", s.Instances, s.Clients, round(s.Duration), strings.Join(fs, "; "))
}

// round keeps a duration readable: milliseconds.
func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// Template is a scenario file's frame and one case of it, as YAML: the
// top-level mapping (name, seed, workload, network; its cases are
// replaced) and the case (backend, options, workload, expect; its name,
// faults, trials and plan seed are replaced).
type Template struct {
	Top  *yaml.Node
	Case *yaml.Node
}

// Spec is one case to render from a template: its name, schedule, how
// its trials run, and what it expects.
type Spec struct {
	Name     string
	Schedule Schedule
	// Trials run side by side, at most SideBySide at once (0: one after
	// another); Need is how many must meet Expect.
	Trials, Need, SideBySide int
	// PerTrial, when set, gives trial i (0-based) faults of its own (a
	// hunt's batch); Schedule.Faults is then ignored.
	PerTrial [][]Fault
	// Expect is the case's expectation as YAML flow ("{measure: true}").
	Expect string
}

// Render writes a scenario file: the template's frame named name, with
// seed, and one case per spec.
func (t Template) Render(name string, seed int64, specs []Spec) ([]byte, error) {
	top := deepCopy(t.Top)
	setKey(top, "name", str(name))
	setKey(top, "seed", num(fmt.Sprint(seed)))
	delKey(top, "description")
	var cases []*yaml.Node
	for _, sp := range specs {
		c, err := t.renderCase(sp)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", sp.Name, err)
		}
		cases = append(cases, c)
	}
	setKey(top, "cases", &yaml.Node{Kind: yaml.SequenceNode, Content: cases})
	b, err := yaml.Marshal(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{top}})
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b, nil
}

func (t Template) renderCase(sp Spec) (*yaml.Node, error) {
	c := deepCopy(t.Case)
	c.Style = 0 // a case a line a field, each value as it was written
	setKey(c, "name", str(sp.Name))
	for _, k := range []string{"nemesis", "faults", "trials", "plan_seed", "expect", "thresholds"} {
		delKey(c, k)
	}
	s := sp.Schedule
	w := valueOf(c, "workload")
	if w == nil || w.Kind != yaml.MappingNode {
		w = &yaml.Node{Kind: yaml.MappingNode}
		setKey(c, "workload", w)
	}
	setKey(w, "duration", str(round(s.Duration).String()))
	if s.Instances > 0 {
		setKey(w, "instances", num(fmt.Sprint(s.Instances)))
	}
	if s.Clients > 0 {
		setKey(w, "clients", num(fmt.Sprint(s.Clients)))
	}
	var fs []*yaml.Node
	add := func(f Fault, name string, trial int) error {
		n, err := faultNode(f, name, trial)
		if err != nil {
			return err
		}
		fs = append(fs, n)
		return nil
	}
	if sp.PerTrial != nil {
		for i, tf := range sp.PerTrial {
			for j, f := range tf {
				if err := add(f, fmt.Sprintf("t%d-%s-%d", i+1, f.Type, j+1), i+1); err != nil {
					return nil, err
				}
			}
		}
	} else {
		for j, f := range s.Faults {
			if err := add(f, fmt.Sprintf("%s-%d", f.Type, j+1), 0); err != nil {
				return nil, err
			}
		}
	}
	if len(fs) > 0 {
		setKey(c, "faults", &yaml.Node{Kind: yaml.SequenceNode, Content: fs})
	}
	if sp.Trials > 1 {
		tr := fmt.Sprintf("{count: %d, need: %d, spread: false}", sp.Trials, max(1, sp.Need))
		if sp.SideBySide > 1 {
			tr = fmt.Sprintf("{count: %d, need: %d, side_by_side: %d, spread: false}", sp.Trials, max(1, sp.Need), sp.SideBySide)
		}
		if err := setFlow(c, "trials", tr); err != nil {
			return nil, err
		}
	}
	if s.PlanSeed != 0 {
		setKey(c, "plan_seed", num(fmt.Sprint(s.PlanSeed)))
	}
	exp := sp.Expect
	if exp == "" {
		exp = "{measure: true}"
	}
	if err := setFlow(c, "expect", exp); err != nil {
		return nil, err
	}
	return c, nil
}

// faultNode writes one fault as a flow mapping.
func faultNode(f Fault, name string, trial int) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	setKey(n, "name", str(name))
	setKey(n, "type", str(f.Type))
	setKey(n, "target", str(f.Target))
	setKey(n, "at", str(round(f.At).String()))
	setKey(n, "for", str(round(f.For).String()))
	if trial > 0 {
		setKey(n, "trial", num(fmt.Sprint(trial)))
	}
	for _, k := range sortedKeys(f.Options) {
		var v yaml.Node
		if err := v.Encode(f.Options[k]); err != nil {
			return nil, fmt.Errorf("fault option %s: %w", k, err)
		}
		setKey(n, k, &v)
	}
	return n, nil
}
