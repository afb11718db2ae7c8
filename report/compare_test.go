package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/verdict"
)

// runs builds n crafted summaries of one case with the given p99 values
// (cycling) and violation count.
func runs(p99 []float64, n, violations int) []*verdict.Summary {
	var out []*verdict.Summary
	for i := 0; i < n; i++ {
		c := verdict.CaseSummary{Check: checker.Result{Case: "redis", Backend: "redis", Violations: violations},
			Metrics: verdict.Metrics{AcquiresPerSec: 100, AcquireLatency: checker.Percentiles{Count: 100, P50: 1, P99: p99[i%len(p99)]}}}
		out = append(out, &verdict.Summary{Cases: []verdict.CaseSummary{c}})
	}
	return out
}

func verdictOf(t *testing.T, c *Comparison, metric string) Delta {
	t.Helper()
	for _, d := range c.Deltas {
		if d.Metric == metric {
			return d
		}
	}
	t.Fatalf("no delta for %s", metric)
	return Delta{}
}

var (
	base = []float64{10, 10.5, 9.8, 10.2, 9.9, 10.1, 10.3, 9.7, 10, 10.4}
	slow = []float64{20, 21, 19.6, 20.4, 19.8, 20.2, 20.6, 19.4, 20, 20.8}
)

func TestCompare(t *testing.T) {
	slight := []float64{10.4, 10.9, 10.2, 10.6, 10.3, 10.5, 10.7, 10.1, 10.4, 10.8} // +4%: significant, under the floor
	tests := []struct {
		name     string
		old, new []*verdict.Summary
		metric   string
		verdict  string
		change   string // "" means: not "~"
		warning  bool
	}{
		{"no change", runs(base, 10, 0), runs(base, 10, 0), "acquire_p99_ms", "ok", "~", false},
		{"significant regression", runs(base, 10, 0), runs(slow, 10, 0), "acquire_p99_ms", "regression", "", false},
		{"significant improvement", runs(slow, 10, 0), runs(base, 10, 0), "acquire_p99_ms", "improvement", "", false},
		{"below the noise floor", runs(base, 10, 0), runs(slight, 10, 0), "acquire_p99_ms", "ok", "", false},
		{"too few samples: a doubling is unverified, not ok", runs(base, 1, 0), runs(slow, 1, 0), "acquire_p99_ms", "unverified", "", true},
		{"too few samples, no change", runs(base, 1, 0), runs(base, 1, 0), "acquire_p99_ms", "ok", "~", true},
		{"safety regression with one sample", runs(base, 1, 0), runs(base, 1, 3), "violations", "safety-regression", "", true},
		{"violations that were already there", runs(base, 3, 2), runs(base, 3, 5), "violations", "ok", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.old, tt.new, DefaultCompareOptions)
			d := verdictOf(t, c, tt.metric)
			if d.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s (%+v)", d.Verdict, tt.verdict, d)
			}
			if tt.change == "~" && d.Change != "~" {
				t.Errorf("change %s, want ~", d.Change)
			}
			if tt.warning != (len(d.Warnings) > 0) {
				t.Errorf("warnings %v, want some: %v", d.Warnings, tt.warning)
			}
			var buf bytes.Buffer
			if err := c.Write(&buf); err != nil || !strings.Contains(buf.String(), tt.metric) {
				t.Errorf("table: %v\n%s", err, buf.String())
			}
		})
	}
}

// TestCompareTooFewRunsIsLoud: with one run a side the comparison says,
// once and first, that nothing can be significant, and footnotes are not
// repeated per row.
func TestCompareTooFewRunsIsLoud(t *testing.T) {
	c := Compare(runs(base, 1, 0), runs(slow, 1, 0), DefaultCompareOptions)
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "TOO FEW RUNS") || c.Unverified == 0 {
		t.Fatalf("warnings %v unverified %d", c.Warnings, c.Unverified)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "WARNING: TOO FEW RUNS") || strings.Count(out, "need >= 4 samples") != 1 {
		t.Errorf("output:\n%s", out)
	}
	if c := Compare(runs(base, 4, 0), runs(base, 4, 0), DefaultCompareOptions); len(c.Warnings) != 0 {
		t.Errorf("4 runs a side can reach p < 0.05, yet: %v", c.Warnings)
	}
	if n := RunsNeeded(0.05); n != 4 {
		t.Errorf("RunsNeeded(0.05) = %d, want 4", n)
	}
}

func TestBenchTxt(t *testing.T) {
	var buf bytes.Buffer
	s := runs([]float64{12.5}, 1, 2)[0]
	s.Cases[0].Metrics.Acquisitions = 40
	s.Cases[0].Metrics.AcquireLatency.Mean = 3
	if err := WriteBenchTxt(&buf, s); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"Unit violations assume=exact", "BenchmarkLock/case=redis/backend=redis 40 3000000 ns/op 100.00 acquires/s", "12500000 p99-ns 2 violations"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench.txt lacks %q:\n%s", want, out)
		}
	}
}
