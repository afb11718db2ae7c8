// Package realized writes and reads realized.json: the schedule every
// trial of a run really met. Each fault as it ran (the target written and
// the one hit, its window relative to the case start, its options, what
// was observed), the seed of the trial's clients' plan, the versions of
// the servers and libraries, the phase the lock was in when each fault
// began (waiting, holding, extending, releasing, idle: from the history),
// and the trial's outcome. bench replay runs such a schedule again and
// bench hunt draws, confirms and shrinks them.
package realized

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// File is the name of the realized schedules in a results folder.
const File = "realized.json"

func init() {
	layout.RegisterFile(layout.File{Order: 50, Name: File,
		Contents: "per trial, the schedule it really met: each fault with the target written and the one hit, its scheduled time and window and the window it was really in force (since the case start), its options, what was observed, and the lock's phase when it began (`waiting`, `holding`, `extending`, `releasing`, `idle`, from the history: the clients of the instance it hit, or of the whole trial for a server or a link); the trial's plan seed, lease and length; the versions of the servers and libraries; and its outcome (violations, damage, whether the lock never came back). `bench replay` runs it again ([hunt.md](hunt.md))"})
}

// Run is realized.json: every trial of a run.
type Run struct {
	Scenario string            `json:"scenario"`
	RunID    string            `json:"run_id"`
	Seed     int64             `json:"seed"`
	Versions map[string]string `json:"versions,omitempty"`
	Trials   []Trial           `json:"trials"`
}

// Trial is one trial's realized schedule and outcome.
type Trial struct {
	// Case is the trial's name as verdicts print it (row.t3); Batch the
	// case the runner ran it in (row.t1-10 for side-by-side trials).
	Case    string `json:"case"`
	Row     string `json:"row"`
	Batch   string `json:"batch"`
	Backend string `json:"backend"`
	Trial   int    `json:"trial"`
	Lane    int    `json:"lane,omitempty"`
	// PlanSeed is the seed its clients drew their plan from (holds,
	// thinks, key picks): a replay's plan_seed.
	PlanSeed   uint64  `json:"plan_seed"`
	LeaseNs    int64   `json:"lease_ns,omitempty"`
	DurationNs int64   `json:"duration_ns"`
	Faults     []Fault `json:"faults"`
	Outcome    Outcome `json:"outcome"`
}

// Fault is one fault as it ran in a trial. Times are relative to the
// case's start.
type Fault struct {
	// FaultCore is the fault as the trial wrote it: its name (without
	// its lane's @lN), type, target (a role, or one of the trial's own
	// instances) and effect; Resolved is what it hit.
	history.FaultCore
	Resolved string         `json:"resolved,omitempty"`
	Shared   bool           `json:"shared,omitempty"` // met by every lane of its batch
	Options  map[string]any `json:"options,omitempty"`
	AtNs     int64          `json:"at_ns"` // scheduled, spread included
	ForNs    int64          `json:"for_ns"`
	SpreadNs int64          `json:"spread_ns,omitempty"`
	StartNs  int64          `json:"start_ns,omitempty"` // really in effect from
	EndNs    int64          `json:"end_ns,omitempty"`
	Applied  bool           `json:"applied"`
	Observed []string       `json:"observed,omitempty"`
	Error    string         `json:"error,omitempty"`
	// Phase is what the trial's lock was doing when the fault began, seen
	// from its target's clients (an instance) or from every client of the
	// trial (a server, a link): PhaseWaiting ... PhaseIdle.
	Phase string `json:"phase"`
}

// The phases of a lock at a fault's start, from its clients' operations
// in flight: the first that applies, in this order.
const (
	PhaseExtending = "extending" // an extend in flight
	PhaseReleasing = "releasing" // a release in flight
	PhaseHolding   = "holding"   // granted, not yet released
	PhaseWaiting   = "waiting"   // an acquire in flight
	PhaseIdle      = "idle"      // none of these (thinking, or dead)
	PhaseUnknown   = "unknown"   // the fault never began
)

// Phases lists the phases in the order tables print them.
var Phases = []string{PhaseWaiting, PhaseHolding, PhaseExtending, PhaseReleasing, PhaseIdle, PhaseUnknown}

// Outcome is what the checker said of a trial, in the few figures a
// replay compares.
type Outcome struct {
	Status     string `json:"status"`
	Valid      bool   `json:"valid"`
	Violations int    `json:"violations"`
	// Damage counts late writes that landed: lost updates, stale writes
	// the fencing token let through, increments the store lost.
	Damage int `json:"damage"`
	// NeverBack: after some fault began, the trial's lock granted no live
	// client anything again, though the case went on for at least a lease
	// (and the checker's checker.MinEvidence) after the fault healed and a
	// live client waited for it all that time: what the checker needs to
	// judge "available: false" too.
	NeverBack    bool    `json:"never_back"`
	LongestGapMs float64 `json:"longest_gap_ms"`
}

// Classes of outcome a replay compares (Outcome.Class).
const (
	ClassDamage     = "damage"
	ClassTwoHolders = "two-holders"
	ClassNeverBack  = "never-back"
	ClassClean      = "clean"
	ClassInvalid    = "invalid"
)

// Class sums the outcome up: the worst of damage, two holders, a lock
// that never came back, clean; invalid when the trial could not be
// judged and showed nothing unsafe.
func (o Outcome) Class() string {
	switch {
	case o.Damage > 0:
		return ClassDamage
	case o.Violations > 0:
		return ClassTwoHolders
	case !o.Valid:
		return ClassInvalid
	case o.NeverBack:
		return ClassNeverBack
	}
	return ClassClean
}

// Unsafe says two clients held the lock at once or a late write landed.
func (o Outcome) Unsafe() bool { return o.Violations > 0 || o.Damage > 0 }

// outcomeOf reads a trial's outcome from its checker result; lease is
// the trial's lease (0: none).
func outcomeOf(r checker.Result, lease time.Duration) Outcome {
	o := Outcome{Status: string(r.Status), Valid: r.Valid, Violations: r.Violations, LongestGapMs: r.Liveness.LongestGapMs,
		Damage: r.Resource.LostUpdates + r.Resource.StaleAccepted}
	if r.Store != nil {
		o.Damage += r.Store.Lost
	}
	for _, f := range r.Liveness.Faults {
		// Nothing granted after the fault began, a clear window long
		// enough to have recovered, and a live client waiting through it
		// (the longest gap spans it): a lock nobody asked for again has
		// not failed anyone.
		if f.NextGrantMs < 0 && f.ClearMs >= max(lease, checker.MinEvidence).Seconds()*1000 && r.Liveness.LongestGapMs >= f.ClearMs {
			o.NeverBack = true
		}
	}
	return o
}

// Build reads a results folder (run.json, faults.jsonl, history.jsonl)
// and the summary checked from it, and returns every trial's realized
// schedule.
func Build(dir string, sum *verdict.Summary) (*Run, error) {
	rf, err := layout.ReadRun(dir)
	if err != nil {
		return nil, fmt.Errorf("realized schedules: %w", err)
	}
	fs, err := layout.ReadFaults(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("realized schedules: %w", err)
	}
	out := &Run{Scenario: rf.Scenario, RunID: rf.RunID, Seed: rf.Seed, Versions: rf.Versions}
	seeds := map[string][]uint64{}
	for _, c := range rf.Cases {
		seeds[c.Name] = c.PlanSeeds
	}
	byCase := map[string][]layout.Fault{}
	for _, f := range fs {
		byCase[f.Case] = append(byCase[f.Case], f)
	}
	outcomes := map[string]checker.Result{}
	if sum != nil {
		for _, c := range sum.Cases {
			outcomes[c.Check.Case] = c.Check
		}
	}
	batches, err := readBatches(filepath.Join(dir, layout.HistoryFile))
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		m := b.meta
		lanes := max(1, m.Lanes)
		for l := 1; l <= lanes; l++ {
			t := Trial{Case: m.Name, Row: m.Row, Batch: m.Name, Backend: m.Backend, Trial: max(1, m.Trial), LeaseNs: m.LeaseNs, DurationNs: m.Duration}
			if t.Row == "" {
				t.Row = m.Name
			}
			if m.Lanes > 0 {
				t.Lane, t.Trial = l, m.Trial+l-1
				t.Case = fmt.Sprintf("%s.t%d", m.Row, t.Trial)
				if m.Row == "" {
					t.Case = fmt.Sprintf("%s.l%d", m.Name, l)
				}
			}
			if s := seeds[m.Name]; len(s) >= l {
				t.PlanSeed = s[l-1]
			}
			for _, f := range byCase[m.Name] {
				if f.Lane != 0 && f.Lane != l {
					continue
				}
				t.Faults = append(t.Faults, b.fault(f, l))
			}
			sort.SliceStable(t.Faults, func(i, j int) bool { return t.Faults[i].AtNs < t.Faults[j].AtNs })
			if r, ok := outcomes[t.Case]; ok {
				t.Outcome = outcomeOf(r, time.Duration(t.LeaseNs))
			} else {
				t.Outcome = Outcome{Status: "missing"}
			}
			out.Trials = append(out.Trials, t)
		}
	}
	return out, nil
}

// fault is layout fault f as lane l of its batch met it.
func (b *batch) fault(f layout.Fault, l int) Fault {
	name := f.Name
	if i := strings.LastIndex(name, "@l"); i > 0 && f.Lane > 0 {
		name = name[:i]
	}
	target := f.Target
	if f.Written != "" {
		target = f.Written
	}
	rf := Fault{FaultCore: history.FaultCore{Name: name, Type: f.Type, Target: target, Effect: f.Effect}, Resolved: f.Resolved, Shared: b.meta.Lanes > 0 && f.Lane == 0,
		Options: f.Options, AtNs: f.AtNs, ForNs: f.ForNs, SpreadNs: f.SpreadNs, Applied: f.Applied, Observed: f.Observed, Error: f.Error, Phase: PhaseUnknown}
	if f.StartNs > 0 {
		rf.StartNs = f.StartNs - b.start
		rf.EndNs = f.EndNs - b.start
	}
	if ph, ok := b.phases[f.Name][l]; ok {
		rf.Phase = ph
	}
	return rf
}

// Write builds the realized schedules of a results folder and writes
// them into it.
func Write(dir string, sum *verdict.Summary) (*Run, error) {
	r, err := Build(dir, sum)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", File, err)
	}
	if err := os.WriteFile(filepath.Join(dir, File), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", File, err)
	}
	return r, nil
}

// Read reads a results folder's realized.json.
func Read(dir string) (*Run, error) {
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, File), err)
	}
	return &r, nil
}

// Find returns the trial a name picks: a trial's case name (row.t3), a
// batch, or a row (its first unsafe trial, else its first never-back,
// else its first).
func (r *Run) Find(name string) (*Trial, error) {
	var row []*Trial
	for i := range r.Trials {
		t := &r.Trials[i]
		if t.Case == name {
			return t, nil
		}
		if t.Row == name || t.Batch == name || name == "" {
			row = append(row, t)
		}
	}
	if len(row) == 0 {
		var names []string
		seen := map[string]bool{}
		for _, t := range r.Trials {
			if !seen[t.Row] {
				seen[t.Row] = true
				names = append(names, t.Row)
			}
		}
		return nil, fmt.Errorf("no trial or row %q in the run (rows: %s)", name, strings.Join(names, ", "))
	}
	for _, pick := range []func(*Trial) bool{func(t *Trial) bool { return t.Outcome.Unsafe() }, func(t *Trial) bool { return t.Outcome.NeverBack }} {
		for _, t := range row {
			if pick(t) {
				return t, nil
			}
		}
	}
	return row[0], nil
}
