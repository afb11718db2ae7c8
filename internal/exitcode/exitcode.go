// Package exitcode defines bench's exit codes and carries them on errors.
// Only package main turns an error into a process exit code, with Of.
//
// The numbers follow k6 where the meaning matches (99 thresholds, 104
// invalid config, 105 external abort) and Jepsen's split between a run that
// found a problem and a run that could not decide.
package exitcode

import (
	"errors"
	"fmt"
)

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

// Entry is one exit code and what it means, in a line (Short, for the
// CLI's help) and in a sentence (Long, for docs/cli.md).
type Entry struct {
	Code        Code
	Short, Long string
}

// Table lists every exit code: the one source of the CLI's help and the
// table in docs/cli.md (a test compares them).
var Table = []Entry{
	{OK, "every case valid and as expected", "every case valid and as expected"},
	{Harness, "harness error (a server would not start, a missing binary, I/O)", "harness error: a server would not start, a binary is missing, I/O"},
	{Threshold, "a threshold failed (after every safety expectation held)", "a threshold failed (every safety expectation held); `bench compare`: a significant performance regression"},
	{Violation, "safety violation where the scenario expected none", "a safety violation where the scenario expected none (also when the case was otherwise invalid); `bench compare`: a safety count rose from zero"},
	{Invalid, "invalid run (no work done, a fault never fired or healed, history cut short)", "an invalid run: no work done, a fault never fired, never healed or had no observed effect, a worker died unexplained or did not exit cleanly when its case ended, the harness was degraded, a liveness question left open, a trial missing, a history cut short"},
	{NotReproduced, "an expected outcome did not appear (known answer not reproduced)", "an expected outcome did not appear (a known answer not reproduced: the run proves nothing about what it was meant to show)"},
	{Unavailable, "the lock was not live as the scenario expects (never recovered, gaps)", "the lock was not live as the scenario expects (not serving again after a fault healed, a gap longer than `max_gap`, a recovery slower than `recovers_within`)"},
	{Config, "bad usage or invalid scenario", "bad usage or an invalid scenario file (every problem as `file:line: field: message`), or a history line outside the record's language"},
	{Interrupted, "interrupted (SIGINT/SIGTERM); everything was torn down", "interrupted by SIGINT/SIGTERM; everything was torn down (a second signal exits at once with 1: teardown abandoned, the next run repairs it)"},
}

// Help is the table for a command's help text.
func Help() string {
	s := "Exit codes:\n"
	for _, e := range Table {
		s += fmt.Sprintf("  %-3d %s\n", e.Code, e.Short)
	}
	return s
}

// Markdown is the table as docs/cli.md writes it.
func Markdown() string {
	s := "| code | meaning |\n|---:|---|\n"
	for _, e := range Table {
		s += fmt.Sprintf("| %d | %s |\n", e.Code, e.Long)
	}
	return s
}
