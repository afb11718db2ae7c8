package checker_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// checkFile runs the checker over a one-case history file.
func checkFile(t *testing.T, path string) checker.Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := history.NewReader(f, path)
	var c *checker.Case
	for r.Next() {
		e := r.Event()
		if e.F == history.MarkCaseStart {
			meta, err := checker.MetaOf(e)
			if err != nil {
				t.Fatal(err)
			}
			c = checker.NewCase(meta, e.T)
			continue
		}
		c.Add(e)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if c == nil {
		t.Fatalf("%s has no case-start", path)
	}
	return c.Result()
}

// TestKnownHistories checks hand-made histories whose verdicts are known,
// and compares the whole result with a golden file.
func TestKnownHistories(t *testing.T) {
	tests := []struct {
		file       string
		status     string
		me         checker.Verdict
		violations int
		resource   checker.Verdict
	}{
		{"safe", "ok", checker.Ok, 0, checker.Ok},
		// X1-lost as run (Curator, a holder cut off past its session, two
		// lanes): two holders in each; linearizability_test.go decides it.
		{"unknown-outcomes", "ok", checker.Violation, 2, checker.Violation},
		{"overlap", "violation", checker.Violation, 1, checker.Ok},
		{"three-holders", "ok", checker.Violation, 3, checker.Ok}, // 2nd meets 1, 3rd meets 2
		{"unknown-acquire", "ok", checker.Ok, 0, checker.Ok},
		{"lost-lease", "ok", checker.Ok, 0, checker.Ok},
		{"crash", "ok", checker.Ok, 0, checker.Ok},
		{"stale-token", "ok", checker.Violation, 1, checker.Violation},
		{"stale-accepted-no-token", "ok", checker.Violation, 1, checker.Violation},
		{"no-work", "invalid", checker.Unknown, 0, checker.Unknown},
		{"fault-never-fired", "invalid", checker.Unknown, 0, checker.Unknown},
		{"fault-error", "invalid", checker.Unknown, 0, checker.Unknown},
		{"cut-short", "unknown", checker.Unknown, 0, checker.Unknown},
		{"not-reproduced", "not-reproduced", checker.Ok, 0, checker.Ok},
		// A grant of what the client already holds is one hold: the next
		// holder after its release is no violation.
		{"regrant", "ok", checker.Ok, 0, checker.Ok},
		// An extension with an unknown outcome (k0: timed out; k1: in
		// flight at the case's end) may have renewed the lease: the
		// grant is certainly gone a lease later (MODEL §6 rule 2), so
		// the zombie times are 399 and 898 ms, not 1399 and 1898.
		{"zombie-unknown-extend", "ok", checker.Ok, 0, checker.Ok},
		// An ok extension after one that timed out (MODEL §6): the
		// timed-out one may land after the ok one, so the lease may run
		// a lease past the ok one's. k0: 1.1 s of zombie time, not 2.1;
		// k1: two timed out before the ok one, which needs one of them to
		// have landed first (the grant had run out by its invoke
		// otherwise): the other is left, 400 ms, not 1.4 s.
		{"zombie-timeout-then-ok", "ok", checker.Ok, 0, checker.Ok},
		// Extensions answered (k0 ok, k1 timed out) after the lost signal
		// ended the hold (MODEL §6): each may have renewed the grant
		// before it ran out, past the hold's end: no zombie, not 798 ms
		// (at most 499 ms in any allowed world).
		{"zombie-reply-after-lost", "ok", checker.Ok, 0, checker.Ok},
		// A holder cut off from the service (dial refused): its
		// extensions, its release and another client's acquire were never
		// sent (unsent, A1): they renew nothing, so the zombie time is the
		// second from the last ok extension's lease to the release, not 0.
		{"zombie-unsent-extend", "ok", checker.Ok, 0, checker.Ok},
		// Workers that die with no fault killing them: the run is invalid.
		{"crash-no-fault", "invalid", checker.Unknown, 0, checker.Unknown},
		// A worker that did not stop when the case ended, killed by the
		// harness: what its client did after the stop is unknown.
		{"stuck-at-stop", "invalid", checker.Unknown, 0, checker.Unknown},
		// No expectation written: the defaults apply (no violations).
		{"no-expect", "violation", checker.Violation, 1, checker.Ok},
		// Acquires in flight when their instance dies, or at the end: unknown.
		{"pending-acquires", "ok", checker.Ok, 0, checker.Ok},
		// A kill ends the holder's hold when applied, not when reaped.
		{"kill-ends-hold", "ok", checker.Ok, 0, checker.Ok},
		// A proven violation is reported even when another fault failed.
		{"violation-and-invalid", "violation", checker.Violation, 1, checker.Unknown},
		// An event dated before its case started.
		{"early-event", "invalid", checker.Unknown, 0, checker.Unknown},
		// A fault whose effect was not seen makes the case invalid.
		{"unobserved", "invalid", checker.Unknown, 0, checker.Unknown},
		// Safe but dead after the fault healed: not a pass.
		{"not-live", "unavailable", checker.Ok, 0, checker.Ok},
		// Expected to stay unavailable, but recovered: not reproduced.
		{"stays-unavailable", "not-reproduced", checker.Ok, 0, checker.Ok},
		// Resource trouble outside any fault, a stuck worker: degraded.
		{"harness-degraded", "invalid", checker.Violation, 1, checker.Unknown},
		// Worker lines lost (bad_lines in the harness mark) and an overlap
		// whose earlier hold's release may be among them: the overlap is
		// counted but proves nothing (MODEL §12): invalid, not decided.
		// The overlap is kept in "unproven", and the proven figures
		// (violations, overlaps, zombies) are none (A7: the least over
		// the allowed worlds).
		{"lost-lines-overlap", "invalid", checker.Unknown, 0, checker.Unknown},
		// The same lost release beside a stale write the fenced resource
		// accepted: the damage is the resource's own mark and stands
		// (status violation), the overlap and the zombie are unproven.
		{"lost-lines-damage", "violation", checker.Unknown, 0, checker.Violation},
		// A store whose record lost two worker lines, and a counter one
		// above the committed increments: a lost store operation explains
		// it, so no phantom is proven (store unknown, invalid, not 100).
		{"store-lost-lines", "invalid", checker.Unknown, 0, checker.Unknown},
		// Coordinator and workers together took the machine's cores.
		{"harness-saturated", "invalid", checker.Unknown, 0, checker.Unknown},
		// A critical section in the backend's database: a commit refused
		// by the release is not counted; totals match the commits.
		{"store-ok", "ok", checker.Ok, 0, checker.Ok},
		// Two compare-and-sets both "committed" but the counter moved by
		// one: a lost update, whatever the lock (there is none) says.
		{"store-lost", "violation", checker.NotApplicable, 0, checker.Violation},
		// No lock, overlapping clients, a conflict and an unknown write:
		// the counter lies within what the history allows.
		{"occ-conflicts", "ok", checker.NotApplicable, 0, checker.Ok},
		// The totals were never read: the store cannot be judged.
		{"store-no-totals", "invalid", checker.Unknown, 0, checker.Unknown},
		// More in the counter than anyone committed.
		{"store-phantom", "violation", checker.Ok, 0, checker.Violation},
		// The releaser takes the key straight back while another client
		// waits, works 488 ms, then hands it over in 2 ms: one barge and
		// one 2 ms hand-off, not 492 ms (MODEL §15; TestHandoffBarges).
		{"handoff-barge", "ok", checker.Ok, 0, checker.Ok},
		// A key nobody asked for until 1.9 s after the heal, served at
		// once: its recovery counts from its demand (A6, A9), 1 ms, and
		// the fault's is k0's 50 ms, not 1901 ms (MODEL §11).
		{"recovery-from-demand", "ok", checker.Ok, 0, checker.Ok},
		// A lock without a TTL whose holder was killed: the survivors ask
		// for k0 in turns, each trying its own other key between its 1 s
		// attempts. Their demand is one, never served: not live (A9).
		{"demand-in-turns", "unavailable", checker.Ok, 0, checker.Ok},
		// A fault that healed 2 s after the stop, a client waiting through
		// it: its recovery was never watched, unknown, and said so (A7);
		// the question was not asked, so the status stands.
		{"heal-after-stop", "ok", checker.Ok, 0, checker.Ok},
		// A pause whose stopped server kill-1, a kill of the same server
		// begun inside the pause's window, ended: the fault-end names it
		// (by) and the heal is a heal (MODEL §10).
		{"pause-ended-by-kill", "ok", checker.Ok, 0, checker.Ok},
		// The same heal naming a kill of another server: no fault of the
		// case took the paused one away, the harness lost it, and the
		// heal failed (A8): invalid, not "not live".
		{"pause-ended-by-other-kill", "invalid", checker.Unknown, 0, checker.Unknown},
		// Jobs (MODEL §20). The lock's holder paused before its effect,
		// its lease ran out, the next holder applied the job; the
		// resumed one applied it too, with the lower token, after the
		// higher one was read applied: a concurrent duplicate and a
		// proven stale effect accepted.
		{"jobs-pause-unfenced", "ok", checker.Violation, 1, checker.Ok},
		// The same pause under an idempotency key: the second effect is
		// refused as a duplicate (one attempt absorbed).
		{"jobs-idempotency", "ok", checker.NotApplicable, 0, checker.Ok},
		// A kill after the effect, before the completion: the queue hands
		// the job out again, a sequential duplicate; a job whose effect
		// had an unknown outcome and one never taken are lost.
		{"jobs-sequential-lost", "violation", checker.NotApplicable, 0, checker.Ok},
		// The sink's records could not all be read: invalid, lost jobs
		// unknown, and the duplicate it did record still proven.
		{"jobs-sink-unread", "violation", checker.NotApplicable, 0, checker.Unknown},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			got := checkFile(t, filepath.Join("testdata", tt.file+".jsonl"))
			if string(got.Status) != tt.status || got.MutualExclusion != tt.me || got.Violations != tt.violations || got.Resource.Verdict != tt.resource {
				t.Errorf("status=%s me=%s violations=%d resource=%s, want %s %s %d %s (invalid: %v, unmet: %v)",
					got.Status, got.MutualExclusion, got.Violations, got.Resource.Verdict, tt.status, tt.me, tt.violations, tt.resource, got.Invalid, got.Unmet)
			}
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			golden := filepath.Join("testdata", tt.file+".golden.json")
			if *update {
				if err := os.WriteFile(golden, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./checker -update to create it)", err)
			}
			if !bytes.Equal(b, want) {
				os.WriteFile(golden+".got", b, 0o644)
				t.Errorf("result differs from %s (got written to %s.got)", golden, golden)
			}
		})
	}
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".jsonl"); !seen[name] {
			t.Errorf("testdata/%s.jsonl has no expected verdict in this table", name)
		}
	}
}

// TestOverlapExampleDescribesWhoHeldWhat checks the words a report shows.
func TestOverlapExampleDescribesWhoHeldWhat(t *testing.T) {
	r := checkFile(t, "testdata/overlap.jsonl")
	if len(r.Examples) != 1 {
		t.Fatalf("examples = %d, want 1", len(r.Examples))
	}
	o := r.Examples[0]
	if o.First != "i1c0" || o.Second != "i2c0" || o.FirstToken != 1 || o.SecondToken != 2 || o.Until != 20 {
		t.Errorf("example = %+v", o)
	}
	d := o.Describe()
	for _, want := range []string{"i1c0 held it", "i2c0 acquired it", "token 2", "until t="} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe() = %q, missing %q", d, want)
		}
	}
}

// TestOutOfOrderEventsMakeTheRunInvalid: the checker relies on time order;
// a history that breaks it must not be judged.
func TestOutOfOrderEventsMakeTheRunInvalid(t *testing.T) {
	c := checker.NewCase(history.CaseMeta{Name: "x", Duration: 20}, 0)
	c.Add(&history.Event{T: 9, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0", Key: "k"})
	c.Add(&history.Event{T: 10, Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k"})
	c.Add(&history.Event{T: 5, Type: history.Invoke, F: history.OpRelease, Proc: "i1c0", Key: "k"})
	c.Add(&history.Event{T: 20, Type: history.Mark, F: history.MarkCaseStop})
	c.Add(&history.Event{T: 20, Type: history.Mark, F: history.MarkCaseEnd})
	r := c.Result()
	if r.Valid || r.Status != "invalid" || r.MutualExclusion != checker.Unknown {
		t.Errorf("got valid=%v status=%s me=%s", r.Valid, r.Status, r.MutualExclusion)
	}
}

// TestNextGrantNeverNegative: an ok dated before the fault-start it
// follows in the file (a record out of order) is not the fault's next
// grant (MODEL §15): the next one dated after the start is.
func TestNextGrantNeverNegative(t *testing.T) {
	ms := int64(time.Millisecond)
	c := checker.NewCase(history.CaseMeta{Name: "x", Duration: 200 * ms,
		Faults: []history.ScheduledAt{{FaultCore: history.FaultCore{Name: "partition-1", Type: "partition", Target: "link:resource@instance-2"}, At: 50 * ms, For: 50 * ms}}}, 0)
	c.Add(&history.Event{T: 40 * ms, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0", Key: "k"})
	c.Add(&history.Event{T: 50 * ms, Type: history.Mark, F: history.MarkFaultStart, Fault: "partition-1", Target: "link:resource@instance-2", Observed: "applied"})
	c.Add(&history.Event{T: 50*ms - 1, Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k", Token: 1})
	c.Add(&history.Event{T: 60 * ms, Type: history.Invoke, F: history.OpRelease, Proc: "i1c0", Key: "k"})
	c.Add(&history.Event{T: 61 * ms, Type: history.OK, F: history.OpRelease, Proc: "i1c0", Key: "k"})
	c.Add(&history.Event{T: 70 * ms, Type: history.Invoke, F: history.OpAcquire, Proc: "i2c0", Key: "k"})
	c.Add(&history.Event{T: 80 * ms, Type: history.OK, F: history.OpAcquire, Proc: "i2c0", Key: "k", Token: 2})
	c.Add(&history.Event{T: 100 * ms, Type: history.Mark, F: history.MarkFaultEnd, Fault: "partition-1", Target: "link:resource@instance-2"})
	c.Add(&history.Event{T: 200 * ms, Type: history.Mark, F: history.MarkCaseStop})
	c.Add(&history.Event{T: 200 * ms, Type: history.Mark, F: history.MarkCaseEnd})
	r := c.Result()
	if len(r.Liveness.Faults) != 1 {
		t.Fatalf("faults: %+v", r.Liveness.Faults)
	}
	if got := r.Liveness.Faults[0].NextGrantMs; got != 30 {
		t.Errorf("next grant = %vms, want 30 (the grant dated after the start)", got)
	}
}

// TestTokenRegression: a fencing counter that goes backwards (lost in a
// failover) is counted.
func TestTokenRegression(t *testing.T) {
	c := checker.NewCase(history.CaseMeta{Name: "x", Duration: 100}, 0)
	for i, tok := range []uint64{5, 6, 3, 7} {
		proc := fmt.Sprintf("i%dc0", i+1)
		c.Add(&history.Event{T: int64(10*i + 1), Type: history.Invoke, F: history.OpAcquire, Proc: proc, Key: "k"})
		c.Add(&history.Event{T: int64(10*i + 2), Type: history.OK, F: history.OpAcquire, Proc: proc, Key: "k", Token: tok})
		c.Add(&history.Event{T: int64(10*i + 5), Type: history.Invoke, F: history.OpRelease, Proc: proc, Key: "k"})
	}
	c.Add(&history.Event{T: 100, Type: history.Mark, F: history.MarkCaseStop})
	c.Add(&history.Event{T: 100, Type: history.Mark, F: history.MarkCaseEnd})
	if r := c.Result(); r.TokenRegressions != 1 || r.Violations != 0 {
		t.Errorf("token regressions = %d, violations = %d; want 1, 0", r.TokenRegressions, r.Violations)
	}
}

// TestEdgeCaseDetails checks the figures behind the verdicts of the
// hand-made histories above.
func TestEdgeCaseDetails(t *testing.T) {
	r := checkFile(t, "testdata/regrant.jsonl")
	if r.DuplicateGrants != 1 || r.AcquiresOK != 3 {
		t.Errorf("regrant: duplicates=%d acquires=%d, want 1 and 3", r.DuplicateGrants, r.AcquiresOK)
	}
	r = checkFile(t, "testdata/crash-no-fault.jsonl")
	if len(r.Invalid) != 2 || !strings.Contains(r.Invalid[0], "instance i1 died with no fault killing it (exit status 2)") {
		t.Errorf("crash-no-fault: %v", r.Invalid)
	}
	r = checkFile(t, "testdata/stuck-at-stop.jsonl")
	if len(r.Invalid) != 1 || !strings.Contains(r.Invalid[0], "instance i2 did not exit cleanly when the case ended (did not stop within 11s of being asked to: killed by the harness)") {
		t.Errorf("stuck-at-stop: %v", r.Invalid)
	}
	r = checkFile(t, "testdata/no-expect.jsonl")
	if r.Expect.Violations == nil || *r.Expect.Violations || r.Expect.StaleAccepted == nil {
		t.Errorf("no-expect: defaults not applied: %+v", r.Expect)
	}
	r = checkFile(t, "testdata/pending-acquires.jsonl")
	if r.AcquiresUnknown != 2 {
		t.Errorf("pending-acquires: unknown=%d, want 2 (one killed, one still waiting at the end)", r.AcquiresUnknown)
	}
	r = checkFile(t, "testdata/zombie-unsent-extend.jsonl")
	// MODEL §3, §15: the acquire never sent is counted as such, no
	// unknown, and its caller's wait is a latency sample.
	if r.AcquiresUnsent != 1 || r.AcquiresUnknown != 0 || r.AcquiresFailed != 0 || r.Figures.AcquireLatency.Count != 2 || r.Figures.ExtensionsFailed != 6 {
		t.Errorf("zombie-unsent-extend: unsent %d unknown %d failed %d, latency samples %d, extensions failed %d; want 1 0 0 2 6",
			r.AcquiresUnsent, r.AcquiresUnknown, r.AcquiresFailed, r.Figures.AcquireLatency.Count, r.Figures.ExtensionsFailed)
	}
	r = checkFile(t, "testdata/violation-and-invalid.jsonl")
	if r.Valid || len(r.Invalid) != 1 || len(r.Unmet) != 1 {
		t.Errorf("violation-and-invalid: valid=%v invalid=%v unmet=%v; want both reported", r.Valid, r.Invalid, r.Unmet)
	}
	r = checkFile(t, "testdata/unobserved.jsonl")
	if len(r.Invalid) != 1 || !strings.Contains(r.Invalid[0], "kept receiving") {
		t.Errorf("unobserved: %v", r.Invalid)
	}
	r = checkFile(t, "testdata/not-live.jsonl")
	if r.Liveness.Verdict != checker.Violation || len(r.Liveness.Faults) != 1 || r.Liveness.Faults[0].RecoveredAfterMs != -1 ||
		len(r.Unmet) != 1 || !strings.Contains(r.Unmet[0], "not live after kill-1") {
		t.Errorf("not-live: %+v %v", r.Liveness, r.Unmet)
	}
	r = checkFile(t, "testdata/recovery-from-demand.jsonl")
	if fl := r.Liveness.Faults; len(fl) != 1 || fl[0].Verdict != checker.Met || fl[0].RecoveredAfterMs != 50 {
		t.Errorf("recovery-from-demand: %+v, want met after 50 ms (k0's demand, through the heal)", fl)
	}
	r = checkFile(t, "testdata/demand-in-turns.jsonl")
	if r.Liveness.Verdict != checker.Violation || len(r.Unmet) != 1 || !strings.Contains(r.Unmet[0], "key k0 was never served") {
		t.Errorf("demand-in-turns: %+v %v, want k0 not live", r.Liveness, r.Unmet)
	}
	r = checkFile(t, "testdata/heal-after-stop.jsonl")
	if fl := r.Liveness.Faults; r.Liveness.Verdict != checker.Unknown || len(fl) != 1 || fl[0].Verdict != checker.Undecided ||
		fl[0].ClearMs != -1 || fl[0].RecoveredAfterMs != -1 || len(r.Liveness.Open) != 1 || !strings.Contains(r.Liveness.Open[0], "never watched") {
		t.Errorf("heal-after-stop: %+v, want its recovery unknown and said", r.Liveness)
	}
	r = checkFile(t, "testdata/pause-ended-by-other-kill.jsonl")
	if len(r.Invalid) != 1 || !strings.Contains(r.Invalid[0], "could not be healed (its heal says kill-1 ended its effect, but kill-1 killed zookeeper-2, not zookeeper-1)") {
		t.Errorf("pause-ended-by-other-kill: %v", r.Invalid)
	}
	r = checkFile(t, "testdata/harness-degraded.jsonl")
	h := r.Harness
	// The error inside the partition of link:resource, and the one within
	// op_timeout + 1s of its heal, are the fault's; the one at 5s is not.
	if h.ResourceErrors != 1 || h.LateRequests != 1 || len(h.Degraded) != 3 || r.Resource.TokenReuse != 0 {
		t.Errorf("harness-degraded: %+v reuse=%d", h, r.Resource.TokenReuse)
	}
}

// TestOverlapAndZombieFigures plants a history with known durations: a
// holder paused past its 100 ms lease; the service grants the key to
// another client 150 ms after the first grant's completion; the paused
// holder learns it lost the lease 230 ms in. Its zombie time runs from
// its lease's sure expiry (10+100 = 110 ms) to its lost signal (240 ms):
// 130 ms; the overlap from the second grant (160 ms) to the lost signal:
// 80 ms. The second holder also outlives its own lease (granted at 160 ms,
// sure gone at 260 ms, released at 300 ms): a zombie for 40 ms when its
// release is refused; none when the service accepts the release, which
// says the grant was still its own (MODEL §6: the service's word
// overrides the lease's inference).
func TestOverlapAndZombieFigures(t *testing.T) {
	ms := int64(1e6)
	for _, tt := range []struct {
		release         history.Type
		zombies         int
		longest, median float64
	}{
		{history.Fail, 2, 130, 40},
		{history.OK, 1, 130, 130},
	} {
		c := checker.NewCase(history.CaseMeta{Name: "z", Duration: 400 * ms, LeaseNs: 100 * ms, Expect: history.Expectation{}}, 0)
		for _, e := range []history.Event{
			{T: 5 * ms, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0", Key: "k0"},
			{T: 10 * ms, Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k0", Token: 1},
			{T: 20 * ms, Type: history.Invoke, F: history.OpAcquire, Proc: "i2c0", Key: "k0"},
			{T: 160 * ms, Type: history.OK, F: history.OpAcquire, Proc: "i2c0", Key: "k0", Token: 2},
			{T: 240 * ms, Type: history.OK, F: history.OpLost, Proc: "i1c0", Key: "k0"},
			{T: 300 * ms, Type: history.Invoke, F: history.OpRelease, Proc: "i2c0", Key: "k0"},
			{T: 301 * ms, Type: tt.release, F: history.OpRelease, Proc: "i2c0", Key: "k0"},
			{T: 400 * ms, Type: history.Mark, F: history.MarkCaseStop},
			{T: 400 * ms, Type: history.Mark, F: history.MarkCaseEnd},
		} {
			c.Add(&e)
		}
		r := c.Result()
		if r.Violations != 1 || r.OverlapMaxMs != 80 || r.OverlapP50Ms != 80 || r.FirstViolationMs != 160 {
			t.Errorf("violations %d overlap max %v p50 %v first %v; want 1, 80, 80, 160", r.Violations, r.OverlapMaxMs, r.OverlapP50Ms, r.FirstViolationMs)
		}
		if r.Zombies != tt.zombies || r.ZombieMaxMs != tt.longest || r.ZombieP50Ms != tt.median {
			t.Errorf("release %s: zombies %d, longest %v ms, median %v; want %d, %v, %v", tt.release, r.Zombies, r.ZombieMaxMs, r.ZombieP50Ms, tt.zombies, tt.longest, tt.median)
		}
	}
	// The same with a lease its library renews unseen: the service's
	// expiry is not known, only the second grant is: 160 to 240 ms.
	c := checker.NewCase(history.CaseMeta{Name: "z", Duration: 400 * ms, LeaseNs: 100 * ms, LeaseRenewed: true}, 0)
	for _, e := range []history.Event{
		{T: 5 * ms, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0", Key: "k0"},
		{T: 10 * ms, Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k0", Token: 1},
		{T: 20 * ms, Type: history.Invoke, F: history.OpAcquire, Proc: "i2c0", Key: "k0"},
		{T: 160 * ms, Type: history.OK, F: history.OpAcquire, Proc: "i2c0", Key: "k0", Token: 2},
		{T: 240 * ms, Type: history.OK, F: history.OpLost, Proc: "i1c0", Key: "k0"},
		{T: 400 * ms, Type: history.Mark, F: history.MarkCaseStop},
		{T: 400 * ms, Type: history.Mark, F: history.MarkCaseEnd},
	} {
		c.Add(&e)
	}
	if r := c.Result(); r.Zombies != 1 || r.ZombieMaxMs != 80 {
		t.Errorf("renewed lease: zombies %d, longest %v ms; want 1, 80", r.Zombies, r.ZombieMaxMs)
	}
}

// TestHandoffBarges: a hand-off ends at the next ok acquire of its key by
// a live client; by another client it is a sample, by the releaser itself
// a barge with no sample (MODEL §15).
func TestHandoffBarges(t *testing.T) {
	ms := int64(time.Millisecond)
	type ev struct {
		t       int64 // ms
		typ     history.Type
		f, proc string
	}
	inv, ok := history.Invoke, history.OK
	acq, rel := history.OpAcquire, history.OpRelease
	// i1c0 holds k from 2 ms; i2c0 waits from 3 ms; the stop is at 900 ms
	start := []ev{{1, inv, acq, "i1c0"}, {2, ok, acq, "i1c0"}, {3, inv, acq, "i2c0"}}
	tests := []struct {
		name    string
		events  []ev
		samples int64
		maxMs   float64
		barges  int
	}{
		{"handed over", []ev{{10, inv, rel, "i1c0"}, {11, ok, rel, "i1c0"}, {12, ok, acq, "i2c0"}}, 1, 2, 0},
		{"barge, then handed over", []ev{
			{10, inv, rel, "i1c0"}, {11, ok, rel, "i1c0"}, {11, inv, acq, "i1c0"}, {12, ok, acq, "i1c0"},
			{500, inv, rel, "i1c0"}, {501, ok, rel, "i1c0"}, {502, ok, acq, "i2c0"}}, 1, 2, 1},
		{"two barges, then handed over", []ev{
			{10, inv, rel, "i1c0"}, {11, ok, rel, "i1c0"}, {11, inv, acq, "i1c0"}, {12, ok, acq, "i1c0"},
			{100, inv, rel, "i1c0"}, {101, ok, rel, "i1c0"}, {101, inv, acq, "i1c0"}, {102, ok, acq, "i1c0"},
			{500, inv, rel, "i1c0"}, {501, ok, rel, "i1c0"}, {504, ok, acq, "i2c0"}}, 1, 4, 2},
		// a barge at the end of the case: the waiter never gets it
		{"barge, never handed over", []ev{
			{10, inv, rel, "i1c0"}, {11, ok, rel, "i1c0"}, {11, inv, acq, "i1c0"}, {12, ok, acq, "i1c0"}}, 0, 0, 1},
		// another client of the releaser's instance is another client
		{"to the releaser's instance", []ev{
			{5, inv, acq, "i1c1"},
			{10, inv, rel, "i1c0"}, {11, ok, rel, "i1c0"}, {13, ok, acq, "i1c1"},
			{20, inv, rel, "i1c1"}, {21, ok, rel, "i1c1"}, {22, ok, acq, "i2c0"}}, 2, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checker.NewCase(history.CaseMeta{Name: "x", Duration: 900 * ms}, 0)
			for _, e := range append(append([]ev{}, start...), tt.events...) {
				h := &history.Event{T: e.t * ms, Type: e.typ, F: e.f, Proc: e.proc, Key: "k"}
				c.Add(h)
			}
			c.Add(&history.Event{T: 900 * ms, Type: history.Mark, F: history.MarkCaseStop})
			c.Add(&history.Event{T: 900 * ms, Type: history.Mark, F: history.MarkCaseEnd})
			f := c.Result().Figures
			if f.Handoff.Count != tt.samples || f.Handoff.Max != tt.maxMs || f.HandoffBarges != tt.barges {
				t.Errorf("hand-off %d samples (max %v ms), %d barges; want %d (max %v ms), %d",
					f.Handoff.Count, f.Handoff.Max, f.HandoffBarges, tt.samples, tt.maxMs, tt.barges)
			}
		})
	}
	// the history the review found: 2 ms hand-overs, not the 492 ms of
	// the releaser's second hold
	f := checkFile(t, "testdata/handoff-barge.jsonl").Figures
	if f.Handoff.Count != 1 || f.Handoff.P50 > 2.01 || f.Handoff.Max != 2 || f.HandoffBarges != 1 {
		t.Errorf("handoff-barge: %+v, %d barges; want one sample of 2 ms and 1 barge", f.Handoff, f.HandoffBarges)
	}
}
