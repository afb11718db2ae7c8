// Command bench benchmarks and chaos-tests distributed lock algorithms.
//
//	bench run SCENARIO.yaml           run a scenario, write a results folder
//	bench validate SCENARIO.yaml...   check scenarios and print their schedules
//	bench check HISTORY.jsonl|DIR     re-check a stored history, print verdicts
//	bench report DIR...               regenerate report and plots from a history
//	bench index [DIR]                 index.html over the results folders in DIR
//	bench table DIR...                rows of results folders as one table
//	bench compare OLD NEW             compare runs, benchstat style, and gate
//	bench list [DIR]                  backends (with options), faults, scenarios
//	bench perf                        the harness against a bare lock loop
//	bench driver check|perf|list|build  lock clients in any language (docs/drivers.md)
//	bench worker                      (internal) one application instance
//
// Each subcommand lives in a file of its own (cmd_<name>.go); cli.go holds
// the conventions they share. main is the only place an error becomes an
// exit code (package exitcode; the table in docs/cli.md).
package main

import (
	"fmt"
	"os"

	"github.com/lockbench/lockbench/internal/exitcode"
)

func main() {
	ctx, stop := signalContext()
	stopProfile := profile()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	os.Exit(int(exitcode.Of(err)))
}
