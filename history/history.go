// Package history defines lockbench's one record format: history.jsonl, a
// JSON Lines file of events ordered by time, and its reader and writer.
//
// Every subcommand reads or writes this format: workers stream events to the
// coordinator in it, the coordinator merges them into history.jsonl, and
// `bench check` re-reads that file to reproduce a run's verdicts.
//
// Operations follow Jepsen's model: a client records an invoke event when it
// calls the lock service and a completion when the call returns: ok (it took
// effect), fail (it certainly did not, and the service said so), unsent (it
// certainly did not, because the request was never sent: the service said
// nothing) or info (unknown: a timeout or a network error, which may or may
// not have taken effect). Marks are
// single events from the coordinator: case boundaries, fault windows,
// crashes, and the protected resource's view of each read and write.
//
// Times are nanoseconds since the run's base instant, read from the
// system-wide CLOCK_MONOTONIC (see package monoclock), so events from
// different worker processes are comparable. The coordinator writes events in
// nondecreasing time order; readers may rely on it.
package history

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Type is the kind of an event.
type Type string

// The event types.
const (
	Invoke Type = "invoke" // a client calls an operation
	OK     Type = "ok"     // the operation took effect
	Fail   Type = "fail"   // the operation certainly did not take effect: the service said so
	// Unsent: the operation certainly did not take effect because its
	// request was never sent (the dial was refused, the client's own check
	// refused it); the service said nothing, so it is no claim about the
	// grant either way (checker/MODEL.md §0 A1).
	Unsent Type = "unsent"
	Info   Type = "info" // unknown outcome: it may or may not have taken effect
	Mark   Type = "mark" // a coordinator-side event, not an operation
)

// Operation names (field F of invoke/ok/fail/info events).
const (
	OpAcquire = "acquire"
	OpRelease = "release"
	OpExtend  = "extend"
	// OpLost is recorded (type ok) when the client library signals that the
	// lease is no longer held: the client stops believing it holds the lock.
	OpLost = "lost"
	// OpForeignRelease is a client misbehaving on purpose: releasing the
	// key it holds with a wrong token (a lease value that is not its own).
	// ok means the backend removed the lock anyway.
	OpForeignRelease = "release-wrong-token"
	// OpDropped is an open-loop attempt that could not start on time
	// because every client of its instance was busy (type ok, Proc the
	// instance, Intended when it was due): load offered and not delivered.
	OpDropped = "dropped"
	// OpResource is a client's request to the protected resource that
	// failed (type info, with the error): the resource's own marks record
	// the requests that reached it. Outside any fault, failures here are
	// the harness's trouble, not the lock's.
	OpResource = "resource"
	// OpStore is a critical section run in the lock's own database
	// (backends.Store): ok means the increment was written (committed when
	// the release that follows succeeds), fail that nothing was written
	// (Err StoreConflict: a compare-and-set found the data changed), info
	// an unknown outcome.
	OpStore = "store"
	// OpJob is one attempt of a job (checker/MODEL.md §20): Key the job,
	// Attempt the executor's attempt number of it. invoke: the client took
	// the job up; ok: it recorded the job complete; fail: it certainly
	// applied no effect and gave the job up (the lock was busy, the job
	// was found done, the queue had nothing); info: unknown.
	OpJob = "job"
	// OpEffect is an attempt's one external effect sent to the effect
	// sink: ok, the sink answered that it applied it; fail, that it
	// refused it (Outcome says why); info, unknown. Token is the fencing
	// token it carried (0: none).
	OpEffect = "effect"
)

// Outcomes of an effect, as the effect sink recorded it (field Outcome).
const (
	OutcomeApplied   = "applied"   // the sink applied the effect
	OutcomeDuplicate = "duplicate" // refused: the job's effect was already applied (an idempotency key)
	OutcomeStale     = "stale"     // refused: its token was below one the sink had seen (a fence)
)

// StoreConflict is the Err of a store fail event that a compare-and-set
// refused (optimistic concurrency's conflict, followed by a retry).
const StoreConflict = "conflict"

// Mark names (field F of mark events).
const (
	MarkCaseStart  = "case-start"  // Meta holds the CaseMeta
	MarkCaseStop   = "case-stop"   // the workload's time is up: workers are asked to stop
	MarkCaseEnd    = "case-end"    // every worker has stopped
	MarkFaultStart = "fault-start" // a fault is in effect from now
	MarkFaultEnd   = "fault-end"   // the fault was healed
	MarkFaultError = "fault-error" // a scheduled fault could not be applied
	MarkCrash      = "crash"       // a worker instance died; Proc is "iN"
	MarkResRead    = "res-read"    // the protected resource served a read
	MarkResWrite   = "res-write"   // the protected resource received a write
	// MarkFaultUnobserved: a fault was applied but the effect it should
	// have had was not seen (Err says what was missing); the case is
	// invalid.
	MarkFaultUnobserved = "fault-unobserved"
	// MarkFaultIdle: nothing used the fault's target while it was in force
	// (a link no client sent anything through). Alone, the fault did
	// nothing the run can show; as one of a group whose other member was
	// observed, it is part of an observed effect (checker/MODEL.md §10).
	MarkFaultIdle = "fault-idle"
	// MarkHarness closes a case with the harness's own health (Meta holds
	// HarnessStats), so that a case whose figures describe the harness
	// rather than the lock can be told apart.
	MarkHarness = "harness"
	// MarkStoreTotals records, after every client stopped, each key's
	// counter as the backend's own database holds it (Meta: a JSON object
	// of key to value), for backends whose critical section runs there.
	MarkStoreTotals = "store-totals"
	// MarkSinkEffect is the effect sink's own record of one effect it
	// committed (checker/MODEL.md §20), written by the coordinator, never
	// by a worker: Proc the executor, Key the job, Attempt, Token, and
	// Outcome (applied, duplicate or stale). Its time is when the
	// coordinator read the committed record: the effect took effect
	// before it.
	MarkSinkEffect = "sink-effect"
)

// HarnessStats is what the coordinator measured of itself during a case.
type HarnessStats struct {
	// BadLines are worker output lines that were not events: lost events.
	BadLines int `json:"bad_lines"`
	// EmitLagMaxNs is the longest any event waited inside a worker between
	// its timestamp and its write to the coordinator.
	EmitLagMaxNs int64 `json:"worker_emit_lag_max_ns"`
	// CoordinatorCPU is the coordinator's CPU time over the case's wall
	// time (1.0 = one core busy the whole case).
	CoordinatorCPU float64 `json:"coordinator_cpu_cores"`
	// WorkersCPU is the same for all worker processes together.
	WorkersCPU float64 `json:"workers_cpu_cores"`
	// Cores is how many cores the machine has.
	Cores int `json:"cores"`
	// Goroutines, open file descriptors and heap of the coordinator at
	// the end of the case, and the most any one worker reported.
	Goroutines       int   `json:"coordinator_goroutines"`
	FDs              int   `json:"coordinator_fds"`
	HeapBytes        int64 `json:"coordinator_heap_bytes"`
	WorkerGoroutines int   `json:"worker_goroutines_max"`
	WorkerFDs        int   `json:"worker_fds_max"`
	WorkerHeapBytes  int64 `json:"worker_heap_bytes_max"`
	// SinkError says why the effect sink's records could not all be read
	// (a job workload, MODEL §20): its jobs cannot be judged.
	SinkError string `json:"sink_error,omitempty"`
}

// Fenced-side outcomes of a resource request (field Fenced).
const (
	FencedAccepted = "accepted" // token current, value unchanged since the holder's read
	// FencedRejected: the token was lower than the highest the resource had
	// seen, so the stale holder was stopped.
	FencedRejected = "rejected"
	// FencedStale: the token passed the check but the value had changed
	// since this holder read it: a stale write that fencing let through.
	FencedStale = "stale"
)

// Event is one line of history.jsonl.
type Event struct {
	T    int64  `json:"t"`              // ns since the run's base (CLOCK_MONOTONIC)
	Type Type   `json:"type"`           // invoke, ok, fail, unsent, info or mark
	F    string `json:"f"`              // operation or mark name
	Proc string `json:"proc,omitempty"` // client "i<instance>c<client>", instance "i<instance>"
	Key  string `json:"key,omitempty"`  // lock key
	// Token is the fencing token of an acquisition (0: none).
	Token uint64 `json:"token,omitempty"`
	Err   string `json:"err,omitempty"` // error text of fail/info, or of a fault-error
	// Lost is set on a res-write when the unfenced register had been
	// written by someone else since this holder read it: a lost update.
	Lost bool `json:"lost,omitempty"`
	// Fenced is the fenced register's verdict on a res-read or res-write.
	Fenced string `json:"fenced,omitempty"`
	// Reuse is set when a different holder presented the token equal to the
	// highest the fenced register had seen.
	Reuse bool `json:"reuse,omitempty"`
	// Late is set on a res-read or res-write that reached the resource
	// after its client's deadline: the client had already given up.
	Late   bool   `json:"late,omitempty"`
	Fault  string `json:"fault,omitempty"`  // fault marks: the fault's name (crash: the fault that killed it)
	Target string `json:"target,omitempty"` // fault marks: what it hit
	// Observed says, on fault marks, what was seen of the fault's effect.
	Observed string `json:"observed,omitempty"`
	// By names, on a fault-end mark, the fault of the case whose kill
	// ended this fault's effect before its heal could undo it (a pause
	// whose stopped process a kill ended; checker/MODEL.md §10).
	By string `json:"by,omitempty"`
	// Intended is, on an open-loop acquire's invoke (and a dropped
	// attempt), when the schedule wanted it to start: latency counts from
	// there, so a slow lock cannot hide behind a slower rate.
	Intended int64 `json:"intended,omitempty"`
	// Attempt is, on job and effect operations and sink-effect marks, the
	// executor's attempt number of the job (1-based).
	Attempt int64 `json:"attempt,omitempty"`
	// Outcome is, on a sink-effect mark (and an effect's completion), what
	// the sink did with the effect: applied, duplicate or stale.
	Outcome string          `json:"outcome,omitempty"`
	Meta    json.RawMessage `json:"meta,omitempty"` // case-start: CaseMeta
}

// CaseMeta describes a case at its start, so that a history alone is enough
// to re-check a run: which backend ran, what was expected, which faults were
// scheduled.
type CaseMeta struct {
	Name     string        `json:"name"`
	Backend  string        `json:"backend"`
	Fenced   bool          `json:"fenced"` // whether the backend issues fencing tokens
	Duration int64         `json:"duration_ns"`
	Expect   Expectation   `json:"expect"`
	Faults   []ScheduledAt `json:"faults,omitempty"`
	Clients  int           `json:"clients"`
	Keys     int           `json:"keys"`
	// LeaseNs is how long a grant lasts on the server unless extended:
	// the earliest a holder's lease can expire (0: the lock has no lease).
	LeaseNs int64 `json:"lease_ns,omitempty"`
	// LeaseRenewed: the client library renews leases in the background,
	// unseen (etcd, Consul, ZooKeeper sessions): the lease bounds expiry
	// only until the first renewal.
	LeaseRenewed bool `json:"lease_renewed,omitempty"`
	// ExpiryBoundNs is the longest the service may keep the grant of a
	// holder that died or went silent, by the lock's own design (its
	// lease, its session timeout): after a fault heals, the lock is due
	// back by then (checker/MODEL.md §11). 0: such a grant ends at once,
	// or never (a lock without a lease: nothing to wait for).
	ExpiryBoundNs int64 `json:"expiry_bound_ns,omitempty"`
	// OpTimeoutNs is the workload's op_timeout: trouble a fault causes can
	// show up to that long after it heals.
	OpTimeoutNs int64 `json:"op_timeout_ns,omitempty"`
	// Row groups the trials of one case: a case repeated N times (timing
	// makes single runs of a race flaky) is one row, judged by how many of
	// its trials met the expectation.
	Row    string `json:"row,omitempty"`
	Trial  int    `json:"trial,omitempty"`  // 1-based
	Trials int    `json:"trials,omitempty"` // how many trials the row has
	Need   int    `json:"need,omitempty"`   // how many must meet the expectation
	// Lanes is, for a batch of trials run side by side, how many it holds
	// (trials Trial .. Trial+Lanes-1); lane l (1-based) has instances
	// (l-1)*LaneInstances+1 .. l*LaneInstances, keys k((l-1)*Keys) ..
	// k(l*Keys-1), and the faults named <fault>@l<l>. Checking splits the
	// batch into one case per lane (checker/MODEL.md §14).
	Lanes         int `json:"lanes,omitempty"`
	LaneInstances int `json:"lane_instances,omitempty"`
	// Thresholds are pass/fail criteria on the case's metrics, as written
	// ("acquire_p99 < 50ms"); see package threshold.
	Thresholds []string `json:"thresholds,omitempty"`
	// Misuse names the ways the workload's clients misbehave on purpose
	// ("wrong-token release", "work longer than the lease"): faults of the
	// client, not of the cluster.
	Misuse []string `json:"misuse,omitempty"`
	// Lockless: the backend takes no lock (optimistic concurrency), so
	// overlapping holds are expected; Store: the critical section runs in
	// the backend's own database and its totals are checked at the end.
	Lockless bool `json:"lockless,omitempty"`
	Store    bool `json:"store,omitempty"`
	// Control marks a known-unsafe control backend (local, redis-del, ...).
	Control bool `json:"control,omitempty"`
	// Network is "hosts" when every server and instance ran in a network
	// namespace of its own ("" or "loopback": processes on loopback).
	Network string `json:"network,omitempty"`
	// Sweep is, for a case expanded from swept values, which case and
	// which point it stands for.
	Sweep *SweepPoint `json:"sweep,omitempty"`
	// Jobs describes a job workload (checker/MODEL.md §20); nil for the
	// lock loop.
	Jobs *JobsMeta `json:"jobs,omitempty"`
}

// JobsMeta describes a case's jobs: Count jobs j0 .. j<Count-1>, job n
// due n×EveryNs after the case's start, run through Strategy; a job with
// no applied effect GraceNs after it fell due (and after the last heal)
// is lost.
type JobsMeta struct {
	Strategy string `json:"strategy"`
	Count    int    `json:"count"`
	EveryNs  int64  `json:"every_ns"`
	GraceNs  int64  `json:"grace_ns"`
	// Lock: the strategy takes the case's backend's lock around each job.
	Lock bool `json:"lock,omitempty"`
	// First is the number of the case's first job: a lane of trials run
	// side by side has jobs j<First> .. j<First+Count-1>, job n due
	// (n-First)×EveryNs after the start (checker/MODEL.md §14, §20).
	First int `json:"first,omitempty"`
	// Periodic: one job due once per period across every replica (a
	// cron): job n is the run of period n, and every client fires at each
	// period's due time instead of polling for jobs not done (MODEL §20).
	Periodic bool `json:"periodic,omitempty"`
	// Variant names the strategy with its options as the scenario wrote
	// them ("lock {fenced: true}"): one row of the jobs decision view.
	Variant string `json:"variant,omitempty"`
	// Family is the strategy's family (lock, dedupe, queue, nats,
	// redis-streams, leader, none): a case of the family that expects
	// duplicate effects, on the same backend, is the control of the
	// family's other cases in its fault class (MODEL §21: a cell whose
	// control showed nothing is vacuous).
	Family string `json:"family,omitempty"`
}

// The phases of a job attempt a fault can meet (checker/MODEL.md §20):
// before its effect was sent, during it (sent, not answered), after it
// (answered; the job not yet recorded complete).
const (
	PhaseBefore = "before-effect"
	PhaseDuring = "during-effect"
	PhaseAfter  = "after-effect"
)

// JobPhases lists them in the order of an attempt.
var JobPhases = []string{PhaseBefore, PhaseDuring, PhaseAfter}

// SweepPoint is one point of a swept case: its case as written, the axes'
// labels and values ("for", "1.1×lease"), and each value as a number for
// plots (seconds for a duration, the multiple for ttl_x, the position in
// its list for a value that is not a number).
type SweepPoint struct {
	Case   string    `json:"case"`
	Labels []string  `json:"labels"`
	Values []string  `json:"values"`
	X      []float64 `json:"x"`
}

// ScheduledAt names a fault the scenario scheduled for a case.
type ScheduledAt struct {
	FaultCore
	At  int64 `json:"at_ns"`
	For int64 `json:"for_ns"`
	// Group names the faults that act together (cutting every way out of
	// an instance): an idle member is excused by an observed one.
	Group string `json:"group,omitempty"`
	// Class is the fault's class for its target (ClassOrder).
	Class string `json:"class,omitempty"`
	// Lane is, in a batch of side-by-side trials, the lane (1-based) the
	// fault belongs to; 0 outside a batch.
	Lane int `json:"lane,omitempty"`
	// SpreadNs is how much later than written the fault was scheduled, so
	// that the trials of a row meet it at points of the lock's own cycle
	// (CycleNs: its renewal period, or its lease) spread by the seed: each
	// trial an independent draw. 0: as written.
	SpreadNs int64 `json:"spread_ns,omitempty"`
	CycleNs  int64 `json:"cycle_ns,omitempty"`
}

// Expectation is what the scenario file says a case should show.
// Nil fields are not checked; WithDefaults fills the documented defaults.
type Expectation struct {
	// Violations: true means mutual-exclusion violations are expected
	// (a known-unsafe control, or a fault the algorithm cannot survive);
	// false means none may appear.
	Violations *bool `json:"violations,omitempty" yaml:"violations"`
	// StaleAccepted: true means the fenced resource is expected to accept
	// stale writes (no usable token); false means it must accept none.
	StaleAccepted *bool `json:"stale_writes_accepted,omitempty" yaml:"stale_writes_accepted"`
	// LostUpdates: true means lost updates are expected on the unfenced
	// register; false means none may appear.
	LostUpdates *bool `json:"lost_updates,omitempty" yaml:"lost_updates"`
	// TokenRegressions: true means fencing tokens are expected to go back
	// (a store that forgets what it acknowledged); false means none may
	// (a regression then breaks the case's safety). Unset: not judged.
	TokenRegressions *bool `json:"token_regressions,omitempty" yaml:"token_regressions"`
	// LeasesLost: true means some holder must be told it lost its lease;
	// false means none may be (a client that never learns). Unset: not
	// judged.
	LeasesLost *bool `json:"leases_lost,omitempty" yaml:"leases_lost"`
	// Available: true means the lock must be acquired again after each
	// fault heals (within RecoversWithinNs when set); false means it is
	// expected to stay unavailable (a dead holder of a lock without TTL).
	Available *bool `json:"available,omitempty" yaml:"available"`
	// MaxGapNs bounds the longest time without any successful acquisition
	// (0: not checked).
	MaxGapNs int64 `json:"max_gap_ns,omitempty" yaml:"-"`
	// MinGapNs: the longest gap is expected to be at least this long (a
	// lock that stays unavailable well past its TTL; 0: not checked).
	MinGapNs int64 `json:"min_gap_ns,omitempty" yaml:"-"`
	// RecoversWithinNs bounds the time from a fault's heal to the next
	// successful acquisition (0: any time before the case ends).
	RecoversWithinNs int64  `json:"recovers_within_ns,omitempty" yaml:"-"`
	Note             string `json:"note,omitempty" yaml:"note"`
	// Measure: the case measures how often something happens (a point of
	// a safety envelope) and expects nothing: no default applies, and its
	// status is ok unless the run could not answer.
	Measure bool `json:"measure,omitempty" yaml:"measure"`
	// Any names the outcomes (by their JSON names: violations,
	// stale_writes_accepted, lost_updates, token_regressions, leases_lost,
	// available) the lock does not promise either way: they are not
	// judged, and no default applies to them (MODEL §13). In a scenario
	// file: "violations: any".
	Any []string `json:"any,omitempty" yaml:"-"`
	// Linearizable: true means the service's answers must linearize as a
	// lease lock (MODEL §8: a violation breaks the case's safety); false
	// means they are expected not to (a library that speaks for another
	// client's grant). Unset: reported, not judged.
	Linearizable *bool `json:"linearizable,omitempty" yaml:"linearizable"`
	// LateReleasesAccepted and LateExtensionsAccepted: false means every
	// release (extension) sent after its client's grant was certainly
	// gone must be refused, true that the service is expected to accept
	// some (MODEL §6, §13). Asked of a case with no late one, the
	// question has no value (A6). Unset: reported, not judged.
	LateReleasesAccepted   *bool `json:"late_releases_accepted,omitempty" yaml:"late_releases_accepted"`
	LateExtensionsAccepted *bool `json:"late_extensions_accepted,omitempty" yaml:"late_extensions_accepted"`
	// MaxOverlapNs bounds the longest overlap of two holders (MODEL §6,
	// §13): longer breaks the case's safety (0: not checked). It bounds
	// what violations: true (or any) allows.
	MaxOverlapNs int64 `json:"max_overlap_ns,omitempty" yaml:"-"`
	// DuplicateEffects, StaleEffects and LostJobs are a job workload's
	// outcomes (MODEL §20): a job's effect applied twice or more; an
	// effect applied with a token below one already applied for its job;
	// a job due that never had its effect. Unset: not judged.
	DuplicateEffects *bool `json:"duplicate_effects,omitempty" yaml:"duplicate_effects"`
	StaleEffects     *bool `json:"stale_effects_accepted,omitempty" yaml:"stale_effects_accepted"`
	LostJobs         *bool `json:"lost_jobs,omitempty" yaml:"lost_jobs"`
}

// AnyOutcomes are the outcomes an expectation may leave to any
// (Expectation.Any), by their JSON names.
var AnyOutcomes = []string{"violations", "stale_writes_accepted", "lost_updates", "token_regressions", "leases_lost", "available",
	"linearizable", "late_releases_accepted", "late_extensions_accepted",
	"duplicate_effects", "stale_effects_accepted", "lost_jobs"}

// IsAny reports whether e leaves the named outcome to any.
func (e Expectation) IsAny(name string) bool {
	for _, a := range e.Any {
		if a == name {
			return true
		}
	}
	return false
}

// anyConflict returns the first outcome e both leaves to any and sets, or
// names an outcome Any may not hold.
func (e Expectation) anyConflict() error {
	set := map[string]bool{
		"violations": e.Violations != nil, "stale_writes_accepted": e.StaleAccepted != nil,
		"lost_updates": e.LostUpdates != nil, "token_regressions": e.TokenRegressions != nil,
		"leases_lost": e.LeasesLost != nil, "available": e.Available != nil, "linearizable": e.Linearizable != nil,
		"late_releases_accepted": e.LateReleasesAccepted != nil, "late_extensions_accepted": e.LateExtensionsAccepted != nil,
		"duplicate_effects": e.DuplicateEffects != nil, "stale_effects_accepted": e.StaleEffects != nil, "lost_jobs": e.LostJobs != nil,
	}
	for _, a := range e.Any {
		isSet, known := set[a]
		switch {
		case !known:
			return fmt.Errorf("expect: any: %q is not an outcome (one of %s)", a, strings.Join(AnyOutcomes, ", "))
		case isSet:
			return fmt.Errorf("expect: %s is both any and expected", a)
		}
	}
	return nil
}

// WithDefaults returns e with the documented defaults for what it leaves
// unset: no violations; no stale writes accepted when the backend issues
// fencing tokens; and, when the case has faults, a lock that is live again
// after each of them. A history without expectations is thus judged as the
// run judged it: a silent "anything goes" would let a regression pass.
// A case that measures expects nothing (MODEL §13): whatever else its
// expectation says (a hand-written history may say more than validation
// lets a scenario say) is dropped, keeping only its note.
func (e Expectation) WithDefaults(fenced, faults bool) Expectation {
	if e.Measure {
		return Expectation{Measure: true, Note: e.Note}
	}
	no, yes := false, true
	if e.Violations == nil && !e.IsAny("violations") {
		e.Violations = &no
	}
	if e.StaleAccepted == nil && fenced && !e.IsAny("stale_writes_accepted") {
		e.StaleAccepted = &no
	}
	if e.Available == nil && faults && !e.IsAny("available") {
		e.Available = &yes
	}
	return e
}

// Validate checks a case meta against the record's rules
// (checker/MODEL.md §2): a name, a positive duration, no negative count,
// time or bound, trials consistent with need, faults named.
func (m CaseMeta) Validate() error {
	switch {
	case m.Name == "":
		return fmt.Errorf("no case name")
	case m.Duration <= 0:
		return fmt.Errorf("duration_ns: %d is not a positive duration", m.Duration)
	case m.Clients < 0 || m.Keys < 0:
		return fmt.Errorf("clients and keys must not be negative (clients %d, keys %d)", m.Clients, m.Keys)
	case m.LeaseNs < 0 || m.OpTimeoutNs < 0 || m.ExpiryBoundNs < 0:
		return fmt.Errorf("lease_ns, expiry_bound_ns and op_timeout_ns must not be negative")
	case m.Trials < 0 || m.Trial < 0 || m.Need < 0 || m.Trial > m.Trials || m.Need > m.Trials:
		return fmt.Errorf("trial %d of %d (need %d): need 0 <= trial <= trials and need <= trials", m.Trial, m.Trials, m.Need)
	case m.Expect.MaxGapNs < 0 || m.Expect.RecoversWithinNs < 0 || m.Expect.MinGapNs < 0 || m.Expect.MaxOverlapNs < 0:
		return fmt.Errorf("expect: max_gap_ns, min_gap_ns, recovers_within_ns and max_overlap_ns must not be negative")
	}
	if err := m.Expect.anyConflict(); err != nil {
		return err
	}
	for i, f := range m.Faults {
		if f.Name == "" || f.Type == "" {
			return fmt.Errorf("faults[%d]: a fault needs a name and a type", i)
		}
		if f.At < 0 || f.For < 0 {
			return fmt.Errorf("faults[%d] (%s): at_ns and for_ns must not be negative", i, f.Name)
		}
		if f.Lane < 0 || (f.Lane > 0 && f.Lane > m.Lanes) {
			return fmt.Errorf("faults[%d] (%s): lane %d is not a lane of the case (lanes %d)", i, f.Name, f.Lane, m.Lanes)
		}
	}
	return nil
}

// Fault classes group faults the way an architect asks about them ("what
// happens when the holder stalls? when the leader dies?"), whatever server
// name or fault parameters a scenario used. Each fault type says which
// class it belongs to for each kind of target (faults.Info.Classes); the
// schedule records it (ScheduledAt.Class), and views order classes by
// ClassOrder.
const (
	ClassNone      = "no fault"
	ClassPause     = "pause holder"
	ClassCrash     = "crash client"
	ClassStarve    = "starve holder"
	ClassMisuse    = "client misuse"
	ClassSlow      = "slow network"
	ClassLossy     = "lossy network"
	ClassPartition = "partition"
	ClassPauseSrv  = "pause server"
	ClassStarveSrv = "starve server"
	ClassDisk      = "slow disk"
	ClassMemory    = "memory pressure"
	ClassKill      = "kill a member"
	ClassPower     = "power loss"
	ClassDiskFull  = "full disk"
	ClassKillLead  = "kill leader/master"
	ClassFailover  = "failover"
	ClassClock     = "clock jump"
	ClassMixed     = "several faults"
)

// ClassOrder lists the fault classes in the order views show them.
var ClassOrder = []string{ClassNone, ClassPause, ClassCrash, ClassStarve, ClassMisuse, ClassSlow, ClassLossy, ClassPartition,
	ClassPauseSrv, ClassStarveSrv, ClassDisk, ClassMemory, ClassKill, ClassPower, ClassDiskFull, ClassKillLead, ClassFailover, ClassClock, ClassMixed}
