package verdict

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
)

// modelCase is one entry of checker/testdata/model/expected.json: a
// hand-made history whose verdicts were derived from checker/MODEL.md by
// an independent tester, before the checker ever ran on it.
type modelCase struct {
	ExitCode  int         `json:"exit_code"`
	ErrorLine int         `json:"error_line"`
	Cases     []modelWant `json:"cases"`
	Rows      []struct {
		Row        string     `json:"row"`
		Verdict    RowVerdict `json:"verdict"`
		Decided    *int       `json:"decided"`
		Exposures  *int       `json:"exposures"`
		TwoHolders *string    `json:"two_holders"`
		OverlapMax *float64   `json:"overlap_max_ms"`
		ZombieMax  *float64   `json:"zombie_max_ms"`
	} `json:"rows"`
	// Cells are decision-view cells (MODEL §18) the history must give.
	Cells []struct {
		Backend    string  `json:"backend"`
		Class      string  `json:"class"`
		Outcome    *string `json:"outcome"`
		Trials     *int    `json:"trials"`
		Exposures  *int    `json:"exposures"`
		TwoHolders *string `json:"two_holders"`
		TooFew     *bool   `json:"too_few"`
		During     *int    `json:"acquisitions_during"`
		After      *int    `json:"acquisitions_after"`
		// The figures a cell sums over its decided trials (MODEL §18):
		// each a case's proven figure, never one the case left open.
		Violations *int     `json:"violations"`
		OverlapMax *float64 `json:"overlap_max_ms"`
		ZombieMax  *float64 `json:"zombie_max_ms"`
		Lost       *int     `json:"lost_updates"`
		Regressed  *int     `json:"token_regressions"`
		Damage     *string  `json:"damage"`
	} `json:"cells"`
	// Envelope gives the two-holders rate of each point of the safety
	// envelope (MODEL §17): "0/0" for none.
	Envelope map[string]string `json:"envelope"`
	Tail     string            `json:"tail"`
	Model    []string          `json:"model"`
	Why      string            `json:"why"`
}

type modelWant struct {
	Status           *string           `json:"status"`
	Valid            *bool             `json:"valid"`
	Violations       *int              `json:"violations"`
	AcquiresOK       *int              `json:"acquires_ok"`
	AcquiresFailed   *int              `json:"acquires_failed"`
	AcquiresUnknown  *int              `json:"acquires_unknown"`
	TokenRegressions *int              `json:"token_regressions"`
	LeasesLost       *int              `json:"leases_lost"`
	ReleasesNotHeld  *int              `json:"releases_not_held"`
	DuplicateGrants  *int              `json:"duplicate_grants"`
	MutualExclusion  *string           `json:"mutual_exclusion"`
	Liveness         *string           `json:"liveness"`
	LongestGapMs     *float64          `json:"longest_gap_ms"`
	FaultLiveness    map[string]string `json:"fault_liveness"`
	Lin              *string           `json:"linearizability"`
	FencedLin        *string           `json:"fenced_linearizability"`
	InvalidContains  []string          `json:"invalid_reason_contains"`
	// The figures of MODEL §6, §15, §16, §17, §19.
	Decided      *bool              `json:"decided"`
	Exposures    *int               `json:"exposures"`
	OverlapMaxMs *float64           `json:"overlap_max_ms"`
	OverlapP50Ms *float64           `json:"overlap_p50_ms"`
	Zombies      *int               `json:"zombies"`
	ZombieMaxMs  *float64           `json:"zombie_max_ms"`
	LatencyCount *int64             `json:"latency_count"`
	LatencyMaxMs *float64           `json:"latency_max_ms"`
	HandoffCount *int64             `json:"handoff_count"`
	HandoffBarge *int               `json:"handoff_barges"`
	HandoffP50Ms *float64           `json:"handoff_p50_ms"`
	Recovered    map[string]float64 `json:"recovered_after_ms"`
	Thresholds   map[string]bool    `json:"thresholds"`
	Phases       map[string][3]int  `json:"phases"`
}

// TestModelCases checks every hand-made history of checker/testdata/model
// and checker/testdata/figures against the verdicts their authors (two
// independent testers) derived from the model and from what a careful
// user needs, before the checker ran on them: the exit code, the refused
// line, each case's status, counts and figures, each row and decision
// cell.
func TestModelCases(t *testing.T) {
	for _, set := range []string{"model", "figures"} {
		t.Run(set, func(t *testing.T) { modelSet(t, filepath.Join("..", "checker", "testdata", set)) })
	}
}

func modelSet(t *testing.T, dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]modelCase
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := all[name]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".jsonl")
			if want.Tail != "" {
				tmp := t.TempDir()
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				path = filepath.Join(tmp, layout.HistoryFile)
				os.WriteFile(path, b, 0o644)
				os.WriteFile(filepath.Join(tmp, layout.TailFile), []byte(want.Tail), 0o644)
			}
			sum, err := AnalyzeFile(path)
			if want.ExitCode == int(exitcode.Config) {
				if err == nil {
					t.Fatalf("accepted; want it refused at line %d (%s)", want.ErrorLine, want.Why)
				}
				if want.ErrorLine > 0 && !regexp.MustCompile(`:`+strconv.Itoa(want.ErrorLine)+`\b`).MatchString(err.Error()) {
					t.Errorf("refused with %v; want line %d named", err, want.ErrorLine)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v (%s)", err, want.Why)
			}
			if got := int(sum.ExitCode()); got != want.ExitCode {
				t.Errorf("exit code %d, want %d", got, want.ExitCode)
			}
			if len(want.Cases) > 0 && len(sum.Cases) != len(want.Cases) {
				t.Fatalf("%d cases, want %d", len(sum.Cases), len(want.Cases))
			}
			for i, w := range want.Cases {
				compareCase(t, i, sum.Cases[i], w)
			}
			for _, w := range want.Rows {
				found := false
				for _, r := range sum.Rows {
					if r.Row != w.Row {
						continue
					}
					found = true
					if r.Verdict != w.Verdict {
						t.Errorf("row %s: %s, want %s (%s)", r.Row, r.Verdict, w.Verdict, r.Why)
					}
					if w.Decided != nil && r.Decided != *w.Decided {
						t.Errorf("row %s decided: %d, want %d", r.Row, r.Decided, *w.Decided)
					}
					if w.Exposures != nil && r.Exposures != *w.Exposures {
						t.Errorf("row %s exposures: %d, want %d", r.Row, r.Exposures, *w.Exposures)
					}
					if w.TwoHolders != nil && fmt.Sprintf("%d/%d", r.TwoHolders.Hits, r.TwoHolders.Of) != *w.TwoHolders {
						t.Errorf("row %s two holders: %s, want %s", r.Row, r.TwoHolders, *w.TwoHolders)
					}
					if w.OverlapMax != nil && r.OverlapMaxMs != *w.OverlapMax {
						t.Errorf("row %s overlap max: %v, want %v", r.Row, r.OverlapMaxMs, *w.OverlapMax)
					}
					if w.ZombieMax != nil && r.ZombieMaxMs != *w.ZombieMax {
						t.Errorf("row %s zombie max: %v, want %v", r.Row, r.ZombieMaxMs, *w.ZombieMax)
					}
				}
				if !found {
					t.Errorf("row %s missing", w.Row)
				}
			}
			if len(want.Cells) > 0 {
				d := NewDecision(sum)
				for _, w := range want.Cells {
					var cell *DecisionCell
					for _, r := range d.Rows {
						if r.Backend == w.Backend {
							cell = r.Cells[w.Class]
						}
					}
					if cell == nil {
						t.Errorf("cell %s/%s missing", w.Backend, w.Class)
						continue
					}
					where := w.Backend + "/" + w.Class
					if w.Outcome != nil && cell.Outcome != *w.Outcome {
						t.Errorf("cell %s outcome: %s, want %s", where, cell.Outcome, *w.Outcome)
					}
					if w.Trials != nil && cell.Trials != *w.Trials {
						t.Errorf("cell %s trials: %d, want %d", where, cell.Trials, *w.Trials)
					}
					if w.Exposures != nil && cell.Exposures != *w.Exposures {
						t.Errorf("cell %s exposures: %d, want %d", where, cell.Exposures, *w.Exposures)
					}
					if w.TwoHolders != nil && fmt.Sprintf("%d/%d", cell.TwoHolders.Hits, cell.TwoHolders.Of) != *w.TwoHolders {
						t.Errorf("cell %s two holders: %s, want %s", where, cell.TwoHolders, *w.TwoHolders)
					}
					if w.TooFew != nil && cell.TooFew != *w.TooFew {
						t.Errorf("cell %s too few: %v, want %v", where, cell.TooFew, *w.TooFew)
					}
					if w.During != nil && cell.AcquisitionsDuring != *w.During {
						t.Errorf("cell %s during: %d, want %d", where, cell.AcquisitionsDuring, *w.During)
					}
					if w.After != nil && cell.AcquisitionsAfter != *w.After {
						t.Errorf("cell %s after: %d, want %d", where, cell.AcquisitionsAfter, *w.After)
					}
					if w.Violations != nil && cell.Violations != *w.Violations {
						t.Errorf("cell %s violations: %d, want %d", where, cell.Violations, *w.Violations)
					}
					if w.OverlapMax != nil && cell.OverlapMaxMs != *w.OverlapMax {
						t.Errorf("cell %s overlap max: %v, want %v", where, cell.OverlapMaxMs, *w.OverlapMax)
					}
					if w.ZombieMax != nil && cell.ZombieMaxMs != *w.ZombieMax {
						t.Errorf("cell %s zombie max: %v, want %v", where, cell.ZombieMaxMs, *w.ZombieMax)
					}
					if w.Lost != nil && cell.LostUpdates != *w.Lost {
						t.Errorf("cell %s lost updates: %d, want %d", where, cell.LostUpdates, *w.Lost)
					}
					if w.Regressed != nil && cell.TokenRegressions != *w.Regressed {
						t.Errorf("cell %s token regressions: %d, want %d", where, cell.TokenRegressions, *w.Regressed)
					}
					if w.Damage != nil && fmt.Sprintf("%d/%d", cell.Damage.Hits, cell.Damage.Of) != *w.Damage {
						t.Errorf("cell %s damage: %s, want %s", where, cell.Damage, *w.Damage)
					}
				}
			}
			for _, l := range Envelope(sum) {
				for _, p := range l.Points {
					where := fmt.Sprintf("%s/%s@%s", l.Case, l.Backend, p.Value)
					if w, ok := want.Envelope[where]; ok && fmt.Sprintf("%d/%d", p.Rate.Hits, p.Rate.Of) != w {
						t.Errorf("envelope %s: %s, want %s", where, p.Rate, w)
					}
				}
			}
			if t.Failed() {
				t.Logf("model %v: %s", want.Model, want.Why)
				for _, c := range sum.Cases {
					t.Logf("case %s: status %s invalid %q unmet %q liveness %+v", c.Check.Case, c.Check.Status, c.Check.Invalid, c.Check.Unmet, c.Check.Liveness)
				}
			}
		})
	}
}

func compareCase(t *testing.T, i int, c CaseSummary, w modelWant) {
	t.Helper()
	r := c.Check
	str := func(field string, got string, want *string) {
		if want != nil && *want != "any" && got != *want {
			t.Errorf("case %d %s: %q, want %q", i, field, got, *want)
		}
	}
	num := func(field string, got int, want *int) {
		if want != nil && got != *want {
			t.Errorf("case %d %s: %d, want %d", i, field, got, *want)
		}
	}
	str("status", string(r.Status), w.Status)
	if w.Valid != nil && r.Valid != *w.Valid {
		t.Errorf("case %d valid: %v, want %v", i, r.Valid, *w.Valid)
	}
	num("violations", r.Violations, w.Violations)
	num("acquires_ok", r.AcquiresOK, w.AcquiresOK)
	num("acquires_failed", r.AcquiresFailed, w.AcquiresFailed)
	num("acquires_unknown", r.AcquiresUnknown, w.AcquiresUnknown)
	num("token_regressions", r.TokenRegressions, w.TokenRegressions)
	num("leases_lost", r.LeasesLost, w.LeasesLost)
	num("releases_not_held", r.ReleasesNotHeld, w.ReleasesNotHeld)
	num("duplicate_grants", r.DuplicateGrants, w.DuplicateGrants)
	str("mutual_exclusion", string(r.MutualExclusion), w.MutualExclusion)
	str("liveness", string(r.Liveness.Verdict), w.Liveness)
	if w.LongestGapMs != nil && math.Abs(r.Liveness.LongestGapMs-*w.LongestGapMs) > 1e-6 {
		t.Errorf("case %d longest_gap_ms: %v, want %v", i, r.Liveness.LongestGapMs, *w.LongestGapMs)
	}
	for f, v := range w.FaultLiveness {
		got, found := "", false
		for _, fl := range r.Liveness.Faults {
			if fl.Fault == f {
				got, found = fl.Verdict, true
			}
		}
		if !found && v != "" {
			t.Errorf("case %d fault %s: not in the liveness figures, want %q", i, f, v)
		} else if got != v {
			t.Errorf("case %d fault %s: %q, want %q", i, f, got, v)
		}
	}
	str("linearizability", string(c.Linearizability.Verdict), w.Lin)
	if w.FencedLin != nil && *w.FencedLin != "" {
		str("fenced linearizability", string(c.Linearizability.Fenced), w.FencedLin)
	}
	if w.Decided != nil && r.Decided != *w.Decided {
		t.Errorf("case %d decided: %v, want %v", i, r.Decided, *w.Decided)
	}
	num("exposures", r.Exposures, w.Exposures)
	num("zombies", r.Zombies, w.Zombies)
	flt := func(field string, got float64, want *float64) {
		if want != nil && math.Abs(got-*want) > 1e-6 {
			t.Errorf("case %d %s: %v, want %v", i, field, got, *want)
		}
	}
	flt("overlap_max_ms", r.OverlapMaxMs, w.OverlapMaxMs)
	flt("overlap_p50_ms", r.OverlapP50Ms, w.OverlapP50Ms)
	flt("zombie_max_ms", r.ZombieMaxMs, w.ZombieMaxMs)
	flt("acquire_latency.max_ms", c.Metrics.AcquireLatency.Max, w.LatencyMaxMs)
	flt("handoff_latency.p50_ms", c.Metrics.Handoff.P50, w.HandoffP50Ms)
	if w.LatencyCount != nil && c.Metrics.AcquireLatency.Count != *w.LatencyCount {
		t.Errorf("case %d acquire_latency.count: %d, want %d", i, c.Metrics.AcquireLatency.Count, *w.LatencyCount)
	}
	if w.HandoffCount != nil && c.Metrics.Handoff.Count != *w.HandoffCount {
		t.Errorf("case %d handoff_latency.count: %d, want %d", i, c.Metrics.Handoff.Count, *w.HandoffCount)
	}
	if w.HandoffBarge != nil && c.Metrics.HandoffBarges != *w.HandoffBarge {
		t.Errorf("case %d handoff_barges: %d, want %d", i, c.Metrics.HandoffBarges, *w.HandoffBarge)
	}
	for f, v := range w.Recovered {
		for _, fl := range r.Liveness.Faults {
			if fl.Fault == f && math.Abs(fl.RecoveredAfterMs-v) > 1e-6 {
				t.Errorf("case %d fault %s recovered after: %v, want %v", i, f, fl.RecoveredAfterMs, v)
			}
		}
	}
	for src, pass := range w.Thresholds {
		found := false
		for _, v := range c.Thresholds {
			if v.Source == src {
				found = true
				if v.Pass != pass {
					t.Errorf("case %d threshold %q: pass %v, want %v (%s)", i, src, v.Pass, pass, v.String())
				}
			}
		}
		if !found {
			t.Errorf("case %d threshold %q missing", i, src)
		}
	}
	for f, want := range w.Phases {
		found := false
		for _, p := range c.Metrics.Phases {
			if p.Fault == f {
				found = true
				if got := [3]int{p.Before.Acquisitions, p.During.Acquisitions, p.After.Acquisitions}; got != want {
					t.Errorf("case %d phases of %s: %v, want %v", i, f, got, want)
				}
			}
		}
		if !found {
			t.Errorf("case %d: no phases of %s", i, f)
		}
	}
	for _, sub := range w.InvalidContains {
		if !strings.Contains(strings.ToLower(strings.Join(r.Invalid, " | ")), strings.ToLower(sub)) {
			t.Errorf("case %d: no invalid reason mentions %q: %q", i, sub, r.Invalid)
		}
	}
}
