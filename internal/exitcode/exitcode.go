// Package exitcode defines bench's exit codes and carries them on errors.
// Only package main turns an error into a process exit code, with Of.
//
// The numbers follow k6 where the meaning matches (99 thresholds, 104
// invalid config, 105 external abort) and Jepsen's split between a run that
// found a problem and a run that could not decide.
package exitcode

import "errors"

// Code is a process exit code.
type Code int

// The exit codes of bench. They are part of the interface: CI jobs gate on
// them, so never renumber one.
const (
	// OK: the run completed, every case was valid and met its expectations.
	OK Code = 0
	// Harness: lockbench itself failed (a server would not start, a file
	// could not be written, a missing binary).
	Harness Code = 1
	// Threshold: a threshold of the scenario failed (acquire_p99 < 50ms),
	// while every safety expectation held.
	Threshold Code = 99
	// Violation: a safety violation where the scenario expected none
	// (mutual exclusion broken, stale writes accepted, lost updates).
	Violation Code = 100
	// Invalid: a run that cannot be judged: no work done, a fault that
	// never fired, a history cut short. Never treated as a pass.
	Invalid Code = 101
	// NotReproduced: a violation the scenario expected (a known-unsafe
	// control, a known failure) did not appear, so the run proves nothing
	// about the checker's power to catch it.
	NotReproduced Code = 102
	// Unavailable: the lock was safe but not live as the scenario expects
	// (never acquired again after a fault healed, a gap longer than
	// max_gap, a recovery slower than recovers_within).
	Unavailable Code = 103
	// Config: bad usage, or a scenario file that is not valid.
	Config Code = 104
	// Interrupted: stopped by SIGINT or SIGTERM; everything was torn down.
	Interrupted Code = 105
)

type withCode struct {
	err  error
	code Code
}

func (e *withCode) Error() string { return e.err.Error() }
func (e *withCode) Unwrap() error { return e.err }

// With attaches code to err unless err already carries one.
func With(err error, code Code) error {
	if err == nil {
		return nil
	}
	var wc *withCode
	if errors.As(err, &wc) {
		return err
	}
	return &withCode{err: err, code: code}
}

// Of returns the exit code carried by err: OK for nil, Harness when none.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	var wc *withCode
	if errors.As(err, &wc) {
		return wc.code
	}
	return Harness
}
