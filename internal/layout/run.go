package layout

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Run is run.json: what a results folder says of the run that made it.
// The coordinator writes it (at the start, and again at the end); the
// report, bench table and tests read it back as this same type, so the
// file has one definition.
type Run struct {
	Scenario     string            `json:"scenario"`
	ScenarioFile string            `json:"scenario_file"`
	ScenarioText string            `json:"scenario_text"`
	Seed         int64             `json:"seed"`
	RunID        string            `json:"run_id"`
	Started      time.Time         `json:"started"`
	Finished     time.Time         `json:"finished"`
	BaseMono     int64             `json:"base_monotonic_ns"`
	Host         Host              `json:"host"`
	Versions     map[string]string `json:"versions"`
	Cases        []RunCase         `json:"cases"`
	Rerun        string            `json:"rerun"`
	Interrupted  bool              `json:"interrupted,omitempty"`
	// StartupS is the time spent starting clusters over the whole run.
	StartupS float64 `json:"cluster_startup_s"`
	// Network is loopback or hosts; Targets the existing servers the run
	// was pointed at (addresses, and the names of the environment
	// variables holding credentials: never their values). Targets is the
	// targets file as the coordinator parsed it (package targets, which
	// sits above this one); readers get its JSON form.
	Network string `json:"network"`
	Targets any    `json:"targets,omitempty"`
}

// RunCase is what run.json says of one case.
type RunCase struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`
	// Slot is the address range the case ran in (127.<64+slot>.0.0/16).
	Slot int `json:"address_slot"`
	// Proxied lists the links that went through toxiproxy, because a
	// fault acted on them (or the workload asked for every link): the
	// others were direct.
	Proxied []string `json:"proxied_links"`
	// StartupS is how long the cluster took to start and become healthy.
	StartupS float64 `json:"cluster_startup_s"`
	// Containers are the worker instances' containers (compose mode).
	Containers []string `json:"worker_containers,omitempty"`
	// Servers are the kinds of server the case started (redis, etcd, …):
	// which of the run's versions a case's verdict stands on.
	Servers []string `json:"servers,omitempty"`
	// Reused names the case that started the servers this case ran on,
	// when it did not start its own (trials and cases on the same
	// servers, the cluster checked back at its baseline in between).
	Reused string `json:"reused_cluster_of,omitempty"`
	// PlanSeeds are the seeds of the clients' plans (their holds, thinks
	// and key picks), one per trial: lane by lane for a batch of trials
	// side by side. A case's plan_seed replays one.
	PlanSeeds []uint64 `json:"plan_seeds,omitempty"`
}

// Host describes the machine a run ran on.
type Host struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	MemoryMB int    `json:"memory_mb"`
	Go       string `json:"go"`
	CPUModel string `json:"cpu_model,omitempty"`
	Kernel   string `json:"kernel,omitempty"`
}

// ReadRun reads a results folder's run.json. A folder without one gives an
// error satisfying errors.Is(err, os.ErrNotExist).
func ReadRun(dir string) (*Run, error) {
	p := filepath.Join(dir, RunFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &r, nil
}

// WriteRun writes run.json into dir, with the secrets of the scenario
// text and the targets file redacted (RedactYAML, RedactValue): a
// command's --requirepass, a driver's env:, a URL's password.
func WriteRun(dir string, r *Run) error {
	red := *r
	red.ScenarioText = RedactYAML(r.ScenarioText)
	red.Rerun = RedactText(r.Rerun)
	if r.Targets != nil {
		t, err := RedactValue(r.Targets)
		if err != nil {
			return fmt.Errorf("encode %s: targets: %w", RunFile, err)
		}
		red.Targets = t
	}
	b, err := json.MarshalIndent(&red, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", RunFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, RunFile), append(b, '\n'), FileMode()); err != nil {
		return fmt.Errorf("write %s: %w", RunFile, err)
	}
	return nil
}
