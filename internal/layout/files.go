package layout

import (
	"fmt"
	"slices"
	"strings"
)

// File is one file of a results folder (or a family of them, one per
// case: "timeline-<case>.png"), and what it holds. Whoever writes it
// registers it: docs/results.md's table of the folder is the registry's
// (TestResultsFolderTableInDocs).
type File struct {
	// Order places the file in the table (the run's own files first).
	Order int
	// Name is its name; Also the other names it comes as (".svg").
	Name string
	Also []string
	// Contents says what it holds.
	Contents string
}

var files []File

// RegisterFile adds a file of a results folder; it panics on a duplicate
// name or order, or on a file that says nothing of its contents.
func RegisterFile(f File) {
	if f.Name == "" || f.Contents == "" {
		panic("layout: RegisterFile with no name or no contents")
	}
	for _, g := range files {
		if g.Name == f.Name || g.Order == f.Order {
			panic(fmt.Sprintf("layout: RegisterFile %s: %s has its name or its order %d", f.Name, g.Name, f.Order))
		}
	}
	files = append(files, f)
}

// Files lists the registered files of a results folder, in order.
func Files() []File {
	out := slices.Clone(files)
	slices.SortFunc(out, func(a, b File) int { return a.Order - b.Order })
	return out
}

// Markdown is the registry as docs/results.md's table of the folder.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| file | contents |\n|---|---|\n")
	for _, f := range Files() {
		names := "`" + f.Name + "`"
		for _, a := range f.Also {
			names += ", `" + a + "`"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", names, f.Contents)
	}
	return b.String()
}

func init() {
	RegisterFile(File{Order: 10, Name: RunFile,
		Contents: "scenario name, file and full text, seed, run id, start/finish times, host (cores, CPU model, memory, kernel, Go), versions of lockbench, the servers and client libraries, per case the address slot, the kinds of server it started, the links that went through toxiproxy and the cluster's start-up time, the start-up time of the whole run, the command that re-runs it"})
	RegisterFile(File{Order: 20, Name: HistoryFile,
		Contents: "every event of the run, in time order (see below)"})
	RegisterFile(File{Order: 30, Name: TailFile,
		Contents: "only when the coordinator died: the events it had received but not yet written in order; `bench check` merges them back (with a warning)"})
	RegisterFile(File{Order: 40, Name: FaultsFile,
		Contents: "one line per scheduled fault: the target written and the one really hit, when it was scheduled, the window in which it was really in effect, what was observed of it (`observed`), the effect that was not (`unobserved`), or the error that kept it from being applied"})
	RegisterFile(File{Order: 60, Name: SummaryFile,
		Contents: "`schema_version` (2; it grows when a field changes meaning or goes away), the run conditions, the decision view, and per case: status, validity and its reasons, verdicts, violations with the first examples, resource damage, the database's verdict for the alternatives (`store`), liveness per fault, the harness's own health, and metrics (acquire and hand-off latency p50/p90/p99/p99.9/max from HDR histograms, hand-off barges (a releaser granted the key straight back while others waited: counted, not timed), acquisitions/s, offered rate and dropped attempts in open loop, failed/unknown acquisitions, extensions, leases lost, hold times, longest gap without an acquisition, before/during/after each fault)"})
	RegisterFile(File{Order: 70, Name: ReportFile,
		Contents: "run conditions and a tally; the decision view; the safety table; the latency and throughput table; the plots, each with a caption saying how to read it; per case its expectation and verdict, availability, thresholds, the linearizability verdict, before/during/after figures per fault, the first violations in words; versions; how to re-run and re-check"})
	RegisterFile(File{Order: 80, Name: HTMLFile,
		Contents: "the same report as one self-contained page (plots embedded): opens without network; `make screenshot RUN=<folder>` renders the whole of it to `report.pdf`, one `report-page-N.png` per page and the first screen as `report.png`"})
	RegisterFile(File{Order: 120, Name: BenchFile,
		Contents: "every case in Go benchmark format (`BenchmarkLock/case=…/backend=… N ns/op acquires/s p50-ns p99-ns violations …`), so stock `benchstat` reads it"})
	RegisterFile(File{Order: 130, Name: LogsDir + "/<case>/",
		Contents: "each server's and each worker instance's log"})
}
