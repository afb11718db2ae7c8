// Package sim simulates lockbench runs whose verdicts and figures are
// known, to test the checker against checker/MODEL.md on histories nobody
// has seen.
//
// A seed (math/rand/v2, PCG) decides everything: a run of one to five cases
// (single cases, a row of trials one after the other or side by side in
// lanes, perhaps with a trial missing, or a swept case of rows that
// measure), each a closed-loop workload of instances i1, i2, ... and their
// clients against a model lock service (correct, or one of the broken
// variants in Variants), under scheduled faults, and with the validity
// problems of MODEL §12 and events outside every unit (§2, §14). The
// history is written by this package's own encoder; it may share
// timestamps between events, be cut in the middle of a line (the
// coordinator died), with or without a tail journal, or hold one line the
// checker must refuse.
//
// The truth (Run.Truth) is worked out from the simulator's own records of
// what happened (each client's beliefs, waits, the instances' lives, the
// faults, the service's own log of what it applied and when), following
// MODEL.md section by section: every count, verdict, duration, latency,
// exposure, rate with its interval, row, decision cell, envelope point and
// threshold. Nothing here calls or imports the checker. Linearizability
// (§8) is claimed "ok" only with a witness (the service's real order
// satisfies every rule of §8, read strictly) and "violation" only with a
// proof (a pattern no order can satisfy under any reading); otherwise it is
// "any", and the test does not compare it.
//
// README.md says how to run the comparison (go test ./internal/sim;
// SIM_SEEDS, SIM_SEED, SIM_FIELDS, -sim.out, FuzzSimulate), how the truth
// checks itself, and which reading of MODEL.md it takes where MODEL.md
// leaves room.
package sim
