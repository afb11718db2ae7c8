package verdict

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockbench/lockbench/internal/layout"
)

// SchemaVersion is the version of summary.json's layout. It grows when a
// field changes meaning or goes away (adding one does not change it), so
// that a consumer can refuse what it does not understand.
const SchemaVersion = 2

// Conditions are what a reader must know before comparing a run's
// numbers with anything: the machine, how the servers were reached, how
// long and how often each case ran. They come from run.json.
type Conditions struct {
	Host         layout.Host `json:"host"`
	Started      time.Time   `json:"started"`
	Finished     time.Time   `json:"finished"`
	ScenarioFile string      `json:"scenario_file"`
	Rerun        string      `json:"rerun"`
	Interrupted  bool        `json:"interrupted,omitempty"`
	StartupS     float64     `json:"cluster_startup_s"`
	Network      string      `json:"network,omitempty"`
	// Cases are run.json's cases: slots, proxied links, start-up times.
	Cases []layout.RunCase `json:"cases"`
}

// AnalyzeDir checks the history of a results folder and adds what its
// run.json says (scenario, seed, versions, run conditions). A folder
// without run.json (a history copied on its own) is analysed without them.
func AnalyzeDir(dir string) (*Summary, error) {
	sum, err := AnalyzeFile(filepath.Join(dir, layout.HistoryFile))
	if err != nil {
		return sum, err
	}
	rf, err := layout.ReadRun(dir)
	if errors.Is(err, os.ErrNotExist) {
		sum.Warnings = append(sum.Warnings, "no run.json beside the history: run conditions unknown")
		return sum, nil
	}
	if err != nil {
		return sum, fmt.Errorf("read run.json: %w", err)
	}
	sum.Scenario, sum.Seed, sum.RunID, sum.Versions = rf.Scenario, rf.Seed, rf.RunID, rf.Versions
	sum.Conditions = &Conditions{Host: rf.Host, Started: rf.Started, Finished: rf.Finished, ScenarioFile: rf.ScenarioFile,
		Rerun: rf.Rerun, Interrupted: rf.Interrupted, StartupS: rf.StartupS, Network: rf.Network, Cases: rf.Cases}
	return sum, nil
}
