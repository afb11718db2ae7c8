package report

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/history"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/threshold"
)

// LatencyPlot is the base name of the latency plot (.png and .svg).
const LatencyPlot = "latency"

// Summary is summary.json: the verdicts and metrics of every case.
type Summary struct {
	// SchemaVersion is the layout version of this file (SchemaVersion).
	SchemaVersion int               `json:"schema_version"`
	Scenario      string            `json:"scenario,omitempty"`
	Seed          int64             `json:"seed"`
	RunID         string            `json:"run_id,omitempty"`
	Versions      map[string]string `json:"versions,omitempty"`
	// Conditions are the run's machine and set-up, from run.json.
	Conditions *Conditions `json:"conditions,omitempty"`
	// Decision is the backends × fault classes view of the run.
	Decision *Decision `json:"decision,omitempty"`
	// Warnings about the history itself (a truncated last line).
	Warnings []string      `json:"warnings,omitempty"`
	Cases    []CaseSummary `json:"cases"`
	// Rows judge each case across its trials (a case without trials is a
	// row of one).
	Rows []RowSummary `json:"rows"`
}

// RowSummary is the verdict on a case repeated over trials: the expected
// outcome must appear in at least Need of them, and no trial of a row that
// expects safety (or liveness) may break it.
type RowSummary struct {
	Row     string `json:"row"`
	Backend string `json:"backend"`
	Trials  int    `json:"trials"`
	Need    int    `json:"need"`
	// Met counts trials whose outcome matched the expectation; Invalid
	// those that could not be judged; Unsafe those with a safety violation
	// the scenario did not expect; Unavailable those where the lock was
	// not live as expected.
	Met         int `json:"met"`
	Invalid     int `json:"invalid"`
	Unsafe      int `json:"unsafe"`
	Unavailable int `json:"unavailable"`
	// Verdict: violation (any trial broke a safety expectation: one unsafe
	// trial is enough, however many others were fine), unavailable (any
	// trial was not live as expected), reproduced (Met >= Need), invalid
	// (too many trials could not be judged to decide), or not-reproduced.
	Verdict string `json:"verdict"`
}

// rows groups the cases by row, in order of first appearance.
func rows(cases []CaseSummary) []RowSummary {
	var out []RowSummary
	idx := map[string]int{}
	for _, c := range cases {
		m := c.Check.Meta
		row := m.Row
		if row == "" {
			row = m.Name
		}
		i, ok := idx[row]
		if !ok {
			need, trials := m.Need, m.Trials
			if need == 0 {
				need = 1
			}
			if trials == 0 {
				trials = 1
			}
			out = append(out, RowSummary{Row: row, Backend: m.Backend, Trials: trials, Need: need})
			i = len(out) - 1
			idx[row] = i
		}
		r := &out[i]
		switch c.Check.Status {
		case "ok":
			r.Met++
		case "invalid", "unknown":
			r.Invalid++
		case "violation":
			r.Unsafe++
		case "unavailable":
			r.Unavailable++
		}
	}
	for i := range out {
		r := &out[i]
		switch {
		case r.Unsafe > 0:
			r.Verdict = "violation"
		case r.Unavailable > 0:
			r.Verdict = "unavailable"
		case r.Met >= r.Need:
			r.Verdict = "reproduced"
		case r.Met+r.Invalid >= r.Need:
			r.Verdict = "invalid"
		default:
			r.Verdict = "not-reproduced"
		}
	}
	return out
}

// CaseSummary is one case's verdicts and metrics.
type CaseSummary struct {
	Check   checker.Result `json:"check"`
	Metrics Metrics        `json:"metrics"`
	// Linearizability is porcupine's verdict on the lock service's own
	// history (see checker.LinOps).
	Linearizability checker.LinResult   `json:"linearizability"`
	Thresholds      []threshold.Verdict `json:"thresholds,omitempty"`
}

// LinTimeout bounds the porcupine check of one key.
var LinTimeout = 10 * time.Second

// ThresholdsFailed counts failed thresholds over all cases.
func (s *Summary) ThresholdsFailed() int {
	n := 0
	for _, c := range s.Cases {
		for _, v := range c.Thresholds {
			if !v.Pass {
				n++
			}
		}
	}
	return n
}

// AnalyzeFile checks the history at path. A tail journal next to it (the
// coordinator died holding events back) is merged in, with a warning.
func AnalyzeFile(path string) (*Summary, error) {
	f, n, err := history.OpenRecovered(path, filepath.Join(filepath.Dir(path), layout.TailFile))
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	sum, err := Analyze(history.NewReader(f, path))
	if sum != nil && n > 0 {
		sum.Warnings = append(sum.Warnings, fmt.Sprintf("%d event(s) recovered from %s: the coordinator stopped before it could write them in order", n, layout.TailFile))
	}
	return sum, err
}

// ErrEmpty means a history holds no case at all.
var ErrEmpty = errors.New("history holds no case (no case-start mark)")

// Analyze runs the checker and the metrics over a history, case by case, in
// one streaming pass. Events outside any case are ignored.
func Analyze(r *history.Reader) (*Summary, error) {
	s := &Summary{SchemaVersion: SchemaVersion}
	var (
		chk *checker.Case
		agg *Aggregator
		lin *checker.LinOps
	)
	finish := func() {
		if chk != nil {
			res := chk.Result()
			cs := CaseSummary{Check: res, Metrics: agg.CloseWith(res.Segments)}
			if lin != nil {
				cs.Linearizability = lin.Result().Judged(res.Valid)
			} else {
				// No lock, so no lock history to linearize.
				cs.Linearizability = checker.LinResult{Verdict: checker.NotApplicable}
			}
			cs.evaluate()
			s.Cases = append(s.Cases, cs)
		}
		chk, agg, lin = nil, nil, nil
	}
	for r.Next() {
		e := r.Event()
		if e.Type == history.Mark && e.F == history.MarkCaseStart {
			finish()
			meta, err := checker.MetaOf(e)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", r.Line(), err)
			}
			chk = checker.NewCase(meta, e.T)
			agg = NewAggregator(e.T)
			lin = nil
			if !meta.Lockless {
				lin = checker.NewLinOps(meta.Fenced, time.Duration(meta.LeaseNs), LinTimeout)
			}
			continue
		}
		if chk == nil {
			continue
		}
		chk.Add(e)
		agg.Add(e)
		if lin != nil {
			lin.Add(e)
		}
		if e.Type == history.Mark && e.F == history.MarkCaseEnd {
			finish()
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	finish()
	s.Rows = rows(s.Cases)
	if t := r.Truncated(); t != "" {
		s.Warnings = append(s.Warnings, t)
	}
	if len(s.Cases) == 0 {
		return s, ErrEmpty
	}
	return s, nil
}

// Err turns the rows' verdicts into the run's outcome (MODEL §14): nil when
// every row is as expected, otherwise an error carrying the exit code of
// the worst verdict. A safety violation outranks an invalid row, which
// outranks a lock that was not live, which outranks a known answer that
// was not reproduced, which outranks a failed threshold.
func (s *Summary) Err() error {
	v := s.Verdicts()
	switch {
	case v["violation"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) violated safety where the scenario expected none", v["violation"]), exitcode.Violation)
	case v["invalid"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) invalid or incomplete: their verdicts are not evidence", v["invalid"]), exitcode.Invalid)
	case v["unavailable"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) were not live as the scenario expects", v["unavailable"]), exitcode.Unavailable)
	case v["not-reproduced"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) did not show the outcome the scenario expects", v["not-reproduced"]), exitcode.NotReproduced)
	case s.ThresholdsFailed() > 0:
		return exitcode.With(fmt.Errorf("%d threshold(s) failed", s.ThresholdsFailed()), exitcode.Threshold)
	}
	return nil
}

// ExitCode is the exit code of Err.
func (s *Summary) ExitCode() exitcode.Code { return exitcode.Of(s.Err()) }
