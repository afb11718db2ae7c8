package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// writeRun writes a crafted results folder holding only summary.json.
func writeRun(t *testing.T, dir string, p99 float64, violations int) {
	t.Helper()
	s := verdict.Summary{Cases: []verdict.CaseSummary{{
		Check:   checker.Result{Case: "redis", Backend: "redis", Status: "ok", Violations: violations},
		Metrics: verdict.Metrics{AcquiresPerSec: 100, AcquireLatency: checker.Percentiles{Count: 100, P50: 1, P99: p99}},
	}}, Rows: []verdict.RowSummary{{Row: "redis", Verdict: "reproduced"}}}
	b, _ := json.Marshal(s)
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, layout.SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompareCommand(t *testing.T) {
	root := t.TempDir()
	base, slow, unsafe := filepath.Join(root, "base"), filepath.Join(root, "slow"), filepath.Join(root, "unsafe")
	for i, p := range []float64{10, 10.2, 9.9, 10.1, 9.8, 10.3, 10, 9.7} {
		writeRun(t, filepath.Join(base, "run"+string(rune('a'+i))), p, 0)
		writeRun(t, filepath.Join(slow, "run"+string(rune('a'+i))), 2*p, 0)
	}
	writeRun(t, unsafe, 10, 4)
	tests := []struct {
		name     string
		old, new string
		code     exitcode.Code
		out      string
	}{
		{"same runs", base, base, exitcode.OK, "~"},
		{"latency doubled over 8 runs", base, slow, exitcode.Threshold, "regression"},
		{"violations appear", filepath.Join(base, "runa"), unsafe, exitcode.Violation, "safety-regression"},
		{"missing folder", base, filepath.Join(root, "nope"), exitcode.Config, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runInProcess(t, "compare", tt.old, tt.new)
			if got := exitcode.Of(err); got != tt.code {
				t.Errorf("exit %d, want %d (%v)\n%s", got, tt.code, err, out)
			}
			if !strings.Contains(out, tt.out) {
				t.Errorf("output lacks %q:\n%s", tt.out, out)
			}
		})
	}
}

// TestAgreeCommand: runs of one profile whose row flipped, or whose rates'
// intervals are disjoint, disagree (exit 102); the same runs agree.
func TestAgreeCommand(t *testing.T) {
	root := t.TempDir()
	writeRun := func(dir, id, digest string, verdictWord verdict.RowVerdict, hits int) {
		t.Helper()
		s := verdict.Summary{RunID: id, Rows: []verdict.RowSummary{{Row: "etcd[pause=0.9×lease]", Backend: "etcd", Verdict: verdictWord, TwoHolders: verdict.NewRate(hits, 10)}}}
		if digest != "" {
			s.Cases = []verdict.CaseSummary{{Digest: digest}}
		}
		b, _ := json.Marshal(s)
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, layout.SummaryFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(dir string, verdictWord verdict.RowVerdict, hits int) {
		t.Helper()
		writeRun(dir, filepath.Base(dir), "", verdictWord, hits)
	}
	write(filepath.Join(root, "stability", "a"), "reproduced", 10)
	write(filepath.Join(root, "stability", "b"), "reproduced", 8)
	write(filepath.Join(root, "zero"), "reproduced", 0)
	write(filepath.Join(root, "flip"), "not-reproduced", 9)
	// MODEL §17 (A5): a copy of run a (its run id), and a copy under
	// another run id that holds the same trial as run d.
	writeRun(filepath.Join(root, "copy-of-a"), "a", "", "reproduced", 10)
	writeRun(filepath.Join(root, "d"), "d", "00000000deadbeef", "reproduced", 10)
	writeRun(filepath.Join(root, "d-renamed"), "d2", "00000000deadbeef", "reproduced", 10)
	if err := os.Symlink(filepath.Join(root, "zero"), filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code exitcode.Code
		out  string
		err  string
	}{
		{"a folder of runs that agree", []string{filepath.Join(root, "stability")}, exitcode.OK, "the runs agree", ""},
		{"10 of 10 against 0 of 10", []string{filepath.Join(root, "stability", "a"), filepath.Join(root, "zero")}, exitcode.NotReproduced, "intervals disjoint: 10 of 10, ≥ 72% | 0 of 10, ≤ 28%", ""},
		{"a verdict flipped", []string{filepath.Join(root, "stability"), filepath.Join(root, "flip")}, exitcode.NotReproduced, "verdict flipped: reproduced | reproduced | not-reproduced", ""},
		{"one run", []string{filepath.Join(root, "zero")}, exitcode.Config, "", ""},
		// A run given twice is one run: refused, never "the runs agree".
		{"one folder named twice", []string{filepath.Join(root, "zero"), filepath.Join(root, "zero")}, exitcode.Config, "", "are one folder"},
		{"a folder and a link to it", []string{filepath.Join(root, "zero"), filepath.Join(root, "latest")}, exitcode.Config, "", "are one folder"},
		{"a copy of a folder", []string{filepath.Join(root, "stability", "a"), filepath.Join(root, "copy-of-a")}, exitcode.Config, "", "are one run (run id a)"},
		{"a copy under another run id", []string{filepath.Join(root, "d"), filepath.Join(root, "d-renamed")}, exitcode.Config, "", "hold the same trial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runInProcess(t, append([]string{"agree"}, tt.args...)...)
			if got := exitcode.Of(err); got != tt.code {
				t.Errorf("exit %d, want %d (%v)\n%s", got, tt.code, err, out)
			}
			if !strings.Contains(out, tt.out) {
				t.Errorf("output lacks %q:\n%s", tt.out, out)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want one saying %q", err, tt.err)
			}
		})
	}
}
