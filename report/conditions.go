package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// writeConditions writes the report's header: the machine, the network,
// versions, durations, seeds and runs, and what the numbers can be
// compared with.
func writeConditions(w io.Writer, s *Summary) {
	c := s.Conditions
	if c == nil {
		fmt.Fprintf(w, "**Run conditions unknown** (no run.json): seed %d.\n\n", s.Seed)
		return
	}
	h := c.Host
	machine := fmt.Sprintf("%d CPU cores", h.CPUs)
	if h.CPUModel != "" {
		machine += " (" + h.CPUModel + ")"
	}
	machine += fmt.Sprintf(", %.0f GB memory, %s/%s", float64(h.MemoryMB)/1024, h.OS, h.Arch)
	if h.Kernel != "" {
		machine += ", kernel " + h.Kernel
	}
	dur := map[string]int{}
	trials := 0
	for _, cs := range s.Cases {
		dur[fmt.Sprintf("%.0f s", float64(cs.Check.Meta.Duration)/1e9)]++
		if cs.Check.Meta.Trials > 1 {
			trials++
		}
	}
	var durs []string
	for d, n := range dur {
		durs = append(durs, fmt.Sprintf("%s (%d)", d, n))
	}
	sort.Strings(durs)
	proxied := 0
	for _, cs := range c.Cases {
		if len(cs.Proxied) > 0 {
			proxied++
		}
	}
	fmt.Fprintf(w, "**Run conditions.** Machine: %s; %s. ", machine, h.Go)
	fmt.Fprintf(w, "Every server ran on this machine on loopback addresses of the run's own (127.64+n.0.0/16); clients went direct, except in %d case(s) whose faults needed a proxy (toxiproxy in the coordinator). ", proxied)
	fmt.Fprintf(w, "Started %s, %s long, cluster start-ups %.1f s in all. ", c.Started.UTC().Format("2006-01-02 15:04 UTC"), c.Finished.Sub(c.Started).Round(time.Second), c.StartupS)
	fmt.Fprintf(w, "%d case(s), lasting %s; %d of them trials of a repeated row; seed %d; one run", len(s.Cases), strings.Join(durs, ", "), trials, s.Seed)
	if c.Interrupted {
		fmt.Fprint(w, " (**interrupted**)")
	}
	fmt.Fprint(w, ". Replay: `"+c.Rerun+"`.\n\n")
	fmt.Fprint(w, "*What these numbers compare with:* cases of this run with each other, and runs of the same scenario on the same machine (`bench compare`, which needs several runs a side to call a change significant). ")
	fmt.Fprint(w, "Not with a networked cluster: loopback has no propagation delay, every server shares these cores with the harness, and the latencies are those of a busy small machine, not of production hardware.\n\n")
}
