package report

import (
	"encoding/json"
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
		Row     string `json:"row"`
		Verdict string `json:"verdict"`
	} `json:"rows"`
	Tail  string   `json:"tail"`
	Model []string `json:"model"`
	Why   string   `json:"why"`
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
}

// TestModelCases checks every hand-made history of checker/testdata/model
// against the verdicts its author derived from the model: the exit code,
// the refused line, each case's status and counts, and each row.
func TestModelCases(t *testing.T) {
	dir := filepath.Join("..", "checker", "testdata", "model")
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
					if r.Row == w.Row {
						found = true
						if r.Verdict != w.Verdict {
							t.Errorf("row %s: %s, want %s (%s)", r.Row, r.Verdict, w.Verdict, r.Why)
						}
					}
				}
				if !found {
					t.Errorf("row %s missing", w.Row)
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
	str("status", r.Status, w.Status)
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
	for _, sub := range w.InvalidContains {
		if !strings.Contains(strings.ToLower(strings.Join(r.Invalid, " | ")), strings.ToLower(sub)) {
			t.Errorf("case %d: no invalid reason mentions %q: %q", i, sub, r.Invalid)
		}
	}
}
