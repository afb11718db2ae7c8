package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/exitcode"
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

// RowSummary is the verdict on a case repeated over trials (MODEL §14):
// the expected outcome must appear in at least Need of them, no trial may
// break a safety or liveness expectation, and a trial that could not be
// judged (invalid, cut short, or missing from the history) could have been
// the one that broke it.
type RowSummary struct {
	Row     string `json:"row"`
	Backend string `json:"backend"`
	Trials  int    `json:"trials"`
	Need    int    `json:"need"`
	// Met counts trials whose outcome matched the expectation; Invalid
	// those that could not be judged, Missing those the history does not
	// hold at all (an interrupted run); Unsafe those with a safety
	// violation the scenario did not expect; Unavailable those where the
	// lock was not live as expected.
	Met         int `json:"met"`
	Invalid     int `json:"invalid"`
	Missing     int `json:"missing,omitempty"`
	Unsafe      int `json:"unsafe"`
	Unavailable int `json:"unavailable"`
	// Verdict: violation (a trial broke a safety expectation: one unsafe
	// trial is enough, however many others were fine), unavailable (a
	// trial was not live as expected), invalid (a trial could not be
	// judged, or the trials disagree on the row), reproduced (Met >= Need)
	// or not-reproduced.
	Verdict string `json:"verdict"`
	// Why says, for an invalid row, what made it so.
	Why string `json:"why,omitempty"`
	// The evidence over the row's decided trials (valid ones, and invalid
	// ones that proved unsafety): the faults that fired in them, and in how
	// many two holders were seen, with a 95% interval.
	Exposures    int     `json:"exposures"`
	TwoHolders   Rate    `json:"two_holders"`
	OverlapMaxMs float64 `json:"overlap_max_ms"`
	ZombieMaxMs  float64 `json:"zombie_max_ms"`
	decided      int
	twoHolders   int
}

// rows groups the cases by row, in order of first appearance, and judges
// each (MODEL §14).
func rows(cases []CaseSummary) []RowSummary {
	var out []RowSummary
	idx := map[string]int{}
	seen := map[string]map[int]bool{}
	for _, c := range cases {
		m := c.Check.Meta
		row := m.Row
		if row == "" {
			row = m.Name
		}
		need, trials, trial := m.Need, m.Trials, m.Trial
		if need == 0 {
			need = 1
		}
		if trials == 0 {
			trials, trial = 1, 1
		}
		i, ok := idx[row]
		if !ok {
			out = append(out, RowSummary{Row: row, Backend: m.Backend, Trials: trials, Need: need})
			i = len(out) - 1
			idx[row] = i
			seen[row] = map[int]bool{}
		}
		r := &out[i]
		switch {
		case r.Trials != trials || r.Need != need:
			r.Why = fmt.Sprintf("its trials disagree on the row: %d trials need %d, and %d need %d", r.Trials, r.Need, trials, need)
		case trial < 1 || trial > trials:
			r.Why = fmt.Sprintf("trial %d is outside 1..%d", trial, trials)
		case seen[row][trial]:
			r.Why = fmt.Sprintf("trial %d appears twice", trial)
		}
		seen[row][trial] = true
		if c.Check.Valid || c.Check.Status == "violation" {
			r.decided++
			r.Exposures += c.Check.FaultsFired
			if c.Check.Violations > 0 {
				r.twoHolders++
			}
		}
		r.OverlapMaxMs = max(r.OverlapMaxMs, c.Check.OverlapMaxMs)
		r.ZombieMaxMs = max(r.ZombieMaxMs, c.Check.ZombieMaxMs)
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
		r.TwoHolders = NewRate(r.twoHolders, r.decided)
		for t := 1; t <= r.Trials; t++ {
			if !seen[r.Row][t] {
				r.Missing++
			}
		}
		switch {
		case r.Unsafe > 0:
			r.Verdict = "violation"
		case r.Unavailable > 0:
			r.Verdict = "unavailable"
		case r.Why != "":
			r.Verdict = "invalid"
		case r.Invalid > 0 || r.Missing > 0:
			r.Verdict = "invalid"
			r.Why = fmt.Sprintf("%d trial(s) could not be judged and %d are missing from the history: any of them could have broken the row", r.Invalid, r.Missing)
		case r.Met >= r.Need:
			r.Verdict = "reproduced"
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
	st := NewStream()
	for r.Next() {
		if _, err := st.Add(r.Event()); err != nil {
			return nil, fmt.Errorf("line %d: %w", r.Line(), err)
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	s := st.Summary()
	if t := r.Truncated(); t != "" {
		s.Warnings = append(s.Warnings, t)
	}
	if len(s.Cases) == 0 {
		return s, ErrEmpty
	}
	return s, nil
}

// Stream judges a history as its events come: each case (each lane of a
// batch of side-by-side trials) as soon as its case-end mark arrives, so
// that a run can say a verdict the moment a case is over. Analyze is a
// Stream over a file.
type Stream struct {
	s     *Summary
	lanes []*laneCheck // one per case, or one per lane of a batch
	split *laneSplit
}

// NewStream returns an empty Stream.
func NewStream() *Stream { return &Stream{s: &Summary{SchemaVersion: SchemaVersion}} }

// Add feeds one event; at a case's end it returns the cases it finished.
// An event outside any case is ignored; a case-start whose meta does not
// decode is an error.
func (st *Stream) Add(e *history.Event) ([]CaseSummary, error) {
	if e.Type == history.Mark && e.F == history.MarkCaseStart {
		done := st.finish()
		meta, err := checker.MetaOf(e)
		if err != nil {
			return done, err
		}
		metas := []history.CaseMeta{meta}
		if meta.Lanes > 1 {
			st.split = newLaneSplit(meta)
			metas = st.split.metas()
		}
		for _, m := range metas {
			st.lanes = append(st.lanes, &laneCheck{chk: checker.NewCase(m, e.T, checker.WithLinearizability(LinTimeout)), agg: NewAggregator(e.T)})
		}
		return done, nil
	}
	if st.lanes == nil {
		return nil, nil
	}
	if st.split == nil {
		st.lanes[0].add(e)
	} else if l := st.split.route(e); l < 0 {
		for i, lc := range st.lanes {
			lc.add(st.split.view(e, i))
		}
	} else if l < len(st.lanes) {
		st.lanes[l].add(e)
	}
	if e.Type == history.Mark && e.F == history.MarkCaseEnd {
		return st.finish(), nil
	}
	return nil, nil
}

// finish judges the cases in progress.
func (st *Stream) finish() []CaseSummary {
	var done []CaseSummary
	for _, l := range st.lanes {
		res := l.chk.Result()
		// A lockless backend has no lock history to linearize: n/a.
		cs := CaseSummary{Check: res, Metrics: l.agg.CloseWith(res), Linearizability: l.chk.Linearizability(res.Valid)}
		cs.evaluate()
		done = append(done, cs)
	}
	st.s.Cases = append(st.s.Cases, done...)
	st.lanes, st.split = nil, nil
	return done
}

// Summary finishes what is still open (a history cut short) and returns
// every case with its rows.
func (st *Stream) Summary() *Summary {
	st.finish()
	st.s.Rows = rows(st.s.Cases)
	return st.s
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

// laneCheck is the checker and metrics of one case, or of one lane of a
// batch of side-by-side trials.
type laneCheck struct {
	chk *checker.Case
	agg *Aggregator
}

func (l *laneCheck) add(e *history.Event) {
	l.chk.Add(e)
	l.agg.Add(e)
}

// laneSplit sends the events of a batch of side-by-side trials to their
// lanes (history.CaseMeta.Lanes): a client's or an instance's to the lane
// of its instance, a fault's to the lane its name ends with (@l<n>), and
// the case's own marks to every lane, each lane judged as a trial of its
// own (checker/MODEL.md §14).
type laneSplit struct {
	meta history.CaseMeta
}

func newLaneSplit(m history.CaseMeta) *laneSplit { return &laneSplit{meta: m} }

// metas returns each lane's case meta: trial Trial+l, its own faults.
func (s *laneSplit) metas() []history.CaseMeta {
	var out []history.CaseMeta
	for l := 0; l < s.meta.Lanes; l++ {
		m := s.meta
		m.Lanes, m.LaneInstances = 0, 0
		m.Trial = s.meta.Trial + l
		m.Name = fmt.Sprintf("%s.t%d", m.Row, m.Trial)
		if m.Row == "" {
			m.Name = fmt.Sprintf("%s.l%d", s.meta.Name, l+1)
		}
		m.Clients = s.meta.Clients / s.meta.Lanes
		m.Faults = nil
		for _, f := range s.meta.Faults {
			if laneOfFault(f.Name) == l+1 {
				m.Faults = append(m.Faults, f)
			}
		}
		out = append(out, m)
	}
	return out
}

// laneOfFault is the lane a fault's name ends with (@l<n>), 0 for none.
func laneOfFault(name string) int {
	i := strings.LastIndex(name, "@l")
	if i < 0 {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(name[i:], "@l%d", &n); err != nil || name[i:] != fmt.Sprintf("@l%d", n) {
		return 0
	}
	return n
}

// route returns the lane (0-based) an event belongs to, or -1 for every
// lane.
func (s *laneSplit) route(e *history.Event) int {
	if e.Type == history.Mark {
		switch e.F {
		case history.MarkFaultStart, history.MarkFaultEnd, history.MarkFaultError, history.MarkFaultUnobserved, history.MarkFaultIdle:
			if n := laneOfFault(e.Fault); n > 0 {
				return n - 1
			}
			return -1
		case history.MarkCrash, history.MarkResRead, history.MarkResWrite:
			return s.laneOfProc(e.Proc)
		}
		return -1
	}
	return s.laneOfProc(e.Proc)
}

// laneOfProc maps "i7c0" or "i7" to its instance's lane.
func (s *laneSplit) laneOfProc(proc string) int {
	var n int
	if _, err := fmt.Sscanf(strings.TrimPrefix(proc, "i"), "%d", &n); err != nil || n < 1 || s.meta.LaneInstances < 1 {
		return -1
	}
	return (n - 1) / s.meta.LaneInstances
}

// view is what a lane sees of an event every lane gets: a store-totals
// mark holds only the lane's own keys.
func (s *laneSplit) view(e *history.Event, lane int) *history.Event {
	if e.Type != history.Mark || e.F != history.MarkStoreTotals || len(e.Meta) == 0 {
		return e
	}
	var totals map[string]int64
	if json.Unmarshal(e.Meta, &totals) != nil {
		return e
	}
	own := map[string]int64{}
	k := s.meta.Keys
	for key, v := range totals {
		var n int
		if _, err := fmt.Sscanf(key, "k%d", &n); err == nil && k > 0 && n/k == lane {
			own[key] = v
		}
	}
	cp := *e
	cp.Meta, _ = json.Marshal(own)
	return &cp
}
