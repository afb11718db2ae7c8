// Package sim simulates lockbench runs whose verdicts are known, to test
// the checker against checker/MODEL.md on histories nobody has seen.
//
// A seed (math/rand/v2, PCG) decides everything: a run of one to five cases
// (single cases, or a row of trials, perhaps with a trial missing), each
// a closed-loop workload of instances i1, i2, ... and their clients
// against a model lock service (correct, or one of the broken variants in
// Variants), under scheduled faults, and with the validity problems of
// MODEL §12. The history is written by this package's own encoder; it may
// be cut in the middle of a line (the coordinator died), with or without a
// tail journal, or hold one line the checker must refuse.
//
// The truth (Run.Truth) is worked out from the simulator's own records of
// what happened (each client's beliefs, waits, the instances' lives, the
// faults, the service's own log of what it applied and when), following
// MODEL.md section by section; nothing here calls or imports the checker.
// Linearizability (§8) is claimed "ok" only with a witness (the service's
// real order satisfies every rule of §8, read strictly) and "violation"
// only with a proof (a pattern no order can satisfy under any reading);
// otherwise it is "any", and the test does not compare it.
//
// Run the comparison with
//
//	go test ./internal/sim                       # seeds 1..300
//	SIM_SEEDS=5000 go test ./internal/sim -run AgainstChecker
//	SIM_SEED=42 go test ./internal/sim -run AgainstChecker   # one seed
//	go test ./internal/sim -run AgainstChecker -sim.out /tmp/sim  # keep everything
//	go test ./internal/sim -fuzz FuzzSimulate
//
// A mismatch names the seed, the case or row, the field and both values,
// and leaves the history (history.jsonl, history.tail.jsonl), the truth
// (truth.json) and the checker's summary (summary.json) in a directory.
//
// Readings of MODEL.md where it leaves room (see also README.md here):
//
//   - §8's table gives "free" as the effect of a refused release or
//     extension even when another client holds the key; read literally a
//     correct service's history (a non-holder's refused release during
//     someone else's hold, then that holder's ok release) has no
//     linearization. The witness reads it as "free when the refused
//     client's own grant had become expirable, else no change"; the proofs
//     hold under either reading.
//   - In an invalid or cut-short case (§12) a fault judged "met" is
//     reported "unknown" (a check that found nothing); "unmet" stands.
//   - A cut-short case is not valid; an acquire still in flight where the
//     history ends counts as unknown (§3's "end of the case").
//   - available: false, and cases without any liveness expectation, have no
//     defined liveness verdict word: not compared.
//   - A fault judged again at the heal of a fault that was never healed, or
//     whose heal failed, is unknown.
//   - The tail journal is merged as a set: every complete line of the
//     history and of the journal, once, in time order.
//   - §9 defines the resource counts but no resource verdict: not compared.
package sim
