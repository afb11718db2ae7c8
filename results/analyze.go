package results

import (
	"errors"
	"fmt"
	"os"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/history"
)

// The files of a results folder.
const (
	RunFile     = "run.json"
	HistoryFile = "history.jsonl"
	FaultsFile  = "faults.jsonl"
	SummaryFile = "summary.json"
	ReportFile  = "report.md"
	LatencyPlot = "latency" // .png and .svg
)

// Summary is summary.json: the verdicts and metrics of every case.
type Summary struct {
	Scenario string            `json:"scenario,omitempty"`
	Seed     int64             `json:"seed"`
	RunID    string            `json:"run_id,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
	// Warnings about the history itself (a truncated last line).
	Warnings []string      `json:"warnings,omitempty"`
	Cases    []CaseSummary `json:"cases"`
}

// CaseSummary is one case's verdicts and metrics.
type CaseSummary struct {
	Check   checker.Result `json:"check"`
	Metrics Metrics        `json:"metrics"`
}

// AnalyzeFile checks the history at path.
func AnalyzeFile(path string) (*Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	return Analyze(history.NewReader(f, path))
}

// ErrEmpty means a history holds no case at all.
var ErrEmpty = errors.New("history holds no case (no case-start mark)")

// Analyze runs the checker and the metrics over a history, case by case, in
// one streaming pass. Events outside any case are ignored.
func Analyze(r *history.Reader) (*Summary, error) {
	s := &Summary{}
	var (
		chk *checker.Case
		agg *Aggregator
	)
	finish := func() {
		if chk != nil {
			s.Cases = append(s.Cases, CaseSummary{Check: chk.Result(), Metrics: agg.Close()})
		}
		chk, agg = nil, nil
	}
	for r.Next() {
		e := r.Event()
		if e.Type == history.Mark && e.F == history.MarkCaseStart {
			finish()
			meta, err := checker.MetaOf(e)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", r.Line(), err)
			}
			chk = checker.NewCase(meta)
			agg = NewAggregator(e.T)
			continue
		}
		if chk == nil {
			continue
		}
		chk.Add(e)
		agg.Add(e)
		if e.Type == history.Mark && e.F == history.MarkCaseEnd {
			finish()
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	finish()
	if t := r.Truncated(); t != "" {
		s.Warnings = append(s.Warnings, t)
	}
	if len(s.Cases) == 0 {
		return s, ErrEmpty
	}
	return s, nil
}
