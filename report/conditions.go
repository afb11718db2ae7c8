package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/verdict"
)

// writeConditions writes the report's header: the machine, the network,
// versions, durations, seeds and runs, and what the numbers can be
// compared with.
func writeConditions(w io.Writer, s *verdict.Summary) {
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
