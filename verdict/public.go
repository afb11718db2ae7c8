package verdict

import (
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/threshold"
)

// The types verdict's results carry from lockbench's internal packages,
// named here so that a module outside lockbench can name them too
// (TestPublicTypesAreNameable holds every one reached).
type (
	// Threshold is a scenario's threshold on a figure (p99_ms < 50).
	Threshold = threshold.Threshold
	// ThresholdVerdict is a threshold's verdict on a case.
	ThresholdVerdict = threshold.Verdict
	// Host is the machine a run ran on (run.json's host).
	Host = layout.Host
	// RunCase is what run.json says of one case.
	RunCase = layout.RunCase
	// ExitCode is bench's exit code for a summary (Summary.ExitCode).
	ExitCode = exitcode.Code
)

// The exit codes (docs/cli.md's table).
const (
	ExitOK            = exitcode.OK
	ExitHarness       = exitcode.Harness
	ExitThreshold     = exitcode.Threshold
	ExitViolation     = exitcode.Violation
	ExitInvalid       = exitcode.Invalid
	ExitNotReproduced = exitcode.NotReproduced
	ExitUnavailable   = exitcode.Unavailable
	ExitConfig        = exitcode.Config
	ExitInterrupted   = exitcode.Interrupted
)
