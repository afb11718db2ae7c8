package layout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockbench/lockbench/history"
)

// Fault is one line of faults.jsonl: a scheduled fault, the window in
// which it was really in effect, and what was observed of it. The
// coordinator writes it as each fault ends; the realized schedules and
// bench replay read it back as this same type.
type Fault struct {
	Case string `json:"case"`
	// FaultCore is the fault as scheduled: name, type, target as written
	// in the scenario, effect.
	history.FaultCore
	Resolved string `json:"resolved,omitempty"` // the concrete target hit
	// Written is, for a fault of one side-by-side trial, its target as
	// the trial wrote it (instance-2 where Target says instance-8).
	Written string `json:"target_in_trial,omitempty"`
	// Lane is, for a fault of one side-by-side trial, its lane (1-based);
	// 0 for a fault every lane of the batch meets, or a case of one trial.
	Lane int `json:"lane,omitempty"`
	// Options are the fault's own options as the scenario wrote them
	// (latency, jump, percent...).
	Options map[string]any `json:"options,omitempty"`
	AtNs    int64          `json:"scheduled_at_ns"` // since the case start
	ForNs   int64          `json:"scheduled_for_ns"`
	// SpreadNs is how much later than written it was scheduled, drawn
	// below the lock's own cycle (CycleNs) so that a row's trials meet it
	// at spread points of it (internal/scenario).
	SpreadNs int64 `json:"spread_ns,omitempty"`
	CycleNs  int64 `json:"cycle_ns,omitempty"`
	StartNs  int64 `json:"start_ns,omitempty"` // since the run base
	EndNs    int64 `json:"end_ns,omitempty"`
	Applied  bool  `json:"applied"`
	// Observed lists what was seen of the fault's effect: when applied,
	// while in force, and when healed.
	Observed []string `json:"observed,omitempty"`
	// Unobserved says which effect was expected and not seen: the fault
	// was applied but did nothing the run can show, so the case is invalid.
	Unobserved string `json:"unobserved,omitempty"`
	// Idle says that nothing used the fault's target while it was in
	// force: invalid alone, excused in a group (checker/MODEL.md §10).
	Idle      string `json:"idle,omitempty"`
	Emulated  string `json:"emulated,omitempty"` // how the fault was emulated, if it was
	Error     string `json:"error,omitempty"`
	HealError string `json:"heal_error,omitempty"`
}

// ReadFaults reads a results folder's faults.jsonl, in the order its
// faults ended. A folder without one gives an error satisfying
// errors.Is(err, os.ErrNotExist).
func ReadFaults(dir string) ([]Fault, error) {
	p := filepath.Join(dir, FaultsFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Fault
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r Fault
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return out, fmt.Errorf("%s:%d: %w", p, n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read %s: %w", p, err)
	}
	return out, nil
}
