// Package checker judges a recorded history. It is pure: no I/O, no clocks,
// no goroutines. Feed it a case's events in time order with Add, then read
// Result. Memory is bounded by the number of keys, clients and faults (and,
// for linearizability, by the longest window of one key), not by the length
// of the history, so a run of millions of acquisitions is checked in one
// streaming pass.
//
// Every rule it applies is written down in MODEL.md, next to this file:
// events and their clock, clients and instances, holds (what a client
// believes: §5), mutual exclusion (§6), tokens (§7), what the service
// granted (linearizability, §8), the resource (§9), faults and their
// groups (§10), availability (§11), validity (§12), expectations and
// status (§13). The code cites the sections. Mutual exclusion,
// linearizability and availability read one set of holds, so they agree by
// construction on when a hold begins and ends.
//
// Every verdict is tri-state: ok, violation or unknown; unknown is never
// ok. A case that cannot be judged (MODEL §12) has Unknown verdicts, except
// for what it did prove: unsafety seen in an invalid run is still unsafety.
package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockbench/lockbench/history"
)

// Verdict is the tri-state outcome of a check.
type Verdict string

// The verdicts.
const (
	Ok        Verdict = "ok"        // checked, nothing wrong
	Violation Verdict = "violation" // checked, something wrong
	Unknown   Verdict = "unknown"   // could not be decided; never counts as ok
	// NotApplicable: the property does not exist for this backend (mutual
	// exclusion of a backend that takes no lock); never counts as ok.
	NotApplicable Verdict = "n/a"
)

// Status sums a case up (MODEL §13).
type Status string

// The statuses, in the order they win over each other.
const (
	StatusViolation     Status = "violation"      // a safety expectation was broken: it wins over everything else
	StatusUnknown       Status = "unknown"        // the history was cut short
	StatusInvalid       Status = "invalid"        // the run cannot be judged (MODEL §12)
	StatusUnavailable   Status = "unavailable"    // the lock was not live as expected
	StatusNotReproduced Status = "not-reproduced" // an expected outcome did not appear
	StatusOK            Status = "ok"
)

// MaxExamples is how many violations a Result lists in detail.
const MaxExamples = 5

// Overlap is one mutual-exclusion violation: Second acquired Key while
// First still believed it held it.
type Overlap struct {
	Key         string `json:"key"`
	First       string `json:"first"`        // client that held first
	FirstSince  int64  `json:"first_since"`  // when First's acquire returned
	FirstToken  uint64 `json:"first_token"`  // First's fencing token (0: none)
	Second      string `json:"second"`       // client that acquired while First held
	SecondSince int64  `json:"second_since"` // when Second's acquire returned
	SecondToken uint64 `json:"second_token"`
	// Until is when the overlap ended (the first of the two stopped
	// believing it held the key); -1 if neither stopped before the end.
	Until int64 `json:"until"`
}

// Describe says in words who held what when. Times are in seconds since the
// run's base.
func (o Overlap) Describe() string {
	until := "the end of the case"
	if o.Until >= 0 {
		until = fmt.Sprintf("t=%.3fs", sec(o.Until))
	}
	return fmt.Sprintf("key %s: %s held it from t=%.3fs (token %s); %s acquired it at t=%.3fs (token %s) while %s still believed it held it, until %s",
		o.Key, o.First, sec(o.FirstSince), tok(o.FirstToken), o.Second, sec(o.SecondSince), tok(o.SecondToken), o.First, until)
}

func sec(ns int64) float64 { return float64(ns) / 1e9 }

func tok(t uint64) string {
	if t == 0 {
		return "none"
	}
	return fmt.Sprint(t)
}

// Result is the checker's judgement of one case.
type Result struct {
	Case    string `json:"case"`
	Backend string `json:"backend"`

	// Status sums the case up: "ok", "violation" (a safety expectation was
	// broken: it wins over everything else), "invalid" (the run cannot be
	// judged), "unknown" (incomplete history), "unavailable" (the lock was
	// not live as expected) or "not-reproduced" (an expected violation, or
	// an expected unavailability, did not appear).
	Status Status `json:"status"`
	Valid  bool   `json:"valid"`
	// CutShort: the history ends before the case did (MODEL §2): none of
	// its figures is complete, whatever its status (a case cut short that
	// proved unsafety is a violation).
	CutShort bool `json:"cut_short,omitempty"`
	// Decided: the case is a sample of its row and of its decision cell
	// (MODEL §17): valid, or readable and it proved unsafety.
	Decided bool `json:"decided"`
	// Exposures counts the occasions on which the lock met a fault
	// (MODEL §16): faults joined by group count once, and only those that
	// reached the workload and were observed.
	Exposures int      `json:"exposures"`
	Invalid   []string `json:"invalid_reasons,omitempty"`
	// Unmet lists each expectation of the scenario that the run broke.
	Unmet []string `json:"unmet_expectations,omitempty"`

	MutualExclusion Verdict   `json:"mutual_exclusion"`
	Violations      int       `json:"violations"`
	Examples        []Overlap `json:"examples,omitempty"`
	// OverlapMaxMs and OverlapP50Ms are how long two holders coexisted:
	// the longest and the median overlap (MODEL §6), 0 without one;
	// FirstViolationMs is when the first overlap began, since the case
	// start (-1: none).
	OverlapMaxMs     float64 `json:"overlap_max_ms"`
	OverlapP50Ms     float64 `json:"overlap_p50_ms"`
	FirstViolationMs float64 `json:"first_violation_ms"`
	// Zombies counts holders that went on believing after the service had
	// certainly taken their grant back (MODEL §6: another client's grant,
	// or a lease nothing renews unseen that ran out), and ZombieMaxMs,
	// ZombieP50Ms how long they did: the window in which a late write does
	// damage unless a token or the work itself stops it.
	// OverlapsMs is a sample of the overlaps' lengths (at most
	// MaxOverlapSample, evenly spread), for their distribution.
	OverlapsMs  []float64 `json:"-"`
	Zombies     int       `json:"zombies"`
	ZombieMaxMs float64   `json:"zombie_max_ms"`
	ZombieP50Ms float64   `json:"zombie_p50_ms"`
	// Late counts the releases and extensions sent after their grant was
	// certainly gone, and the service's answers to them (MODEL §6).
	Late

	// Unproven is what a record that lost worker lines shows and its
	// lost lines could undo (MODEL §12, A4): nil when no line was lost.
	// The figures above are then the proven ones, the least over the
	// worlds the record allows (A7): no overlap, no zombie, and only the
	// store damage the lost lines cannot explain.
	Unproven *Unproven `json:"unproven,omitempty"`

	Resource Resource `json:"resource"`
	// Store judges a critical section run in the backend's own database
	// (nil for the others); its lost increments count as lost updates.
	Store    *Store   `json:"store,omitempty"`
	Jobs     *Jobs    `json:"jobs,omitempty"` // a job workload's (MODEL §20); nil for the lock loop
	Liveness Liveness `json:"liveness"`
	Harness  Harness  `json:"harness"`

	AcquiresOK      int `json:"acquires_ok"`
	AcquiresFailed  int `json:"acquires_failed"`
	AcquiresUnknown int `json:"acquires_unknown"`
	// AcquiresUnsent counts acquires that were surely never sent (MODEL
	// §3): no grant, and no word of the service about the key.
	AcquiresUnsent int `json:"acquires_unsent,omitempty"`
	// DuplicateGrants counts grants of a key its client already held (a
	// duplicated reply, a re-entrant lock): one hold, not two.
	DuplicateGrants int `json:"duplicate_grants,omitempty"`
	// ReleasesNotHeld counts releases refused because the lock was no
	// longer the caller's: the idempotent, token-checked release at work.
	ReleasesNotHeld int `json:"releases_not_held"`
	LeasesLost      int `json:"leases_lost"`
	// WrongTokenReleases counts releases with a wrong token that the
	// backend accepted (removing a lock that was not the caller's).
	WrongTokenReleases int `json:"wrong_token_releases_accepted"`
	// TokenRegressions counts acquisitions whose fencing token was not
	// higher than the highest granted before on the same key (a counter
	// reset by a failover or a restart without persistence): each is a
	// holder the fenced resource will refuse. 0 for tokenless backends.
	TokenRegressions int `json:"token_regressions"`
	Crashes          int `json:"crashes"`
	FaultsFired      int `json:"faults_fired"`

	Expect history.Expectation `json:"expect"`
	Meta   history.CaseMeta    `json:"-"`

	// The figures of MODEL §15, in the summary's metrics section.
	Figures Figures `json:"-"`
	// Readable: the record keeps its own rules (MODEL §12); what an
	// unreadable one seems to show is no evidence.
	Readable bool `json:"-"`
}

// Unproven holds the figures of a record that lost worker lines as the
// record alone shows them (MODEL §12). Each is one the lost lines could
// undo (A4): a lost release invoke or lost-lease signal ends a hold
// anywhere, so no overlap or zombie time is proven; a lost store
// operation or refused release moves an increment, so up to Lines of the
// store's lost or phantom increments are explained.
type Unproven struct {
	// Lines is how many worker lines were lost (bad_lines).
	Lines            int       `json:"lines"`
	Violations       int       `json:"violations"`
	Examples         []Overlap `json:"examples,omitempty"`
	OverlapMaxMs     float64   `json:"overlap_max_ms"`
	OverlapP50Ms     float64   `json:"overlap_p50_ms"`
	FirstViolationMs float64   `json:"first_violation_ms"`
	Zombies          int       `json:"zombies"`
	ZombieMaxMs      float64   `json:"zombie_max_ms"`
	ZombieP50Ms      float64   `json:"zombie_p50_ms"`
	Late
	// StoreLost and StorePhantom are the store's lost and phantom
	// increments the lost lines could explain.
	StoreLost    int `json:"store_lost,omitempty"`
	StorePhantom int `json:"store_phantom,omitempty"`
}

// unprove takes out of r's proven figures what lines lost worker lines
// could undo (MODEL §12, A4), keeping it in r.Unproven: the proven figure
// is the least over the allowed worlds (A7).
func (r *Result) unprove(lines int) {
	u := &Unproven{Lines: lines, Violations: r.Violations, Examples: r.Examples, OverlapMaxMs: r.OverlapMaxMs, OverlapP50Ms: r.OverlapP50Ms,
		FirstViolationMs: r.FirstViolationMs, Zombies: r.Zombies, ZombieMaxMs: r.ZombieMaxMs, ZombieP50Ms: r.ZombieP50Ms, Late: r.Late}
	r.Violations, r.Examples, r.OverlapsMs, r.Late = 0, nil, nil, Late{}
	r.OverlapMaxMs, r.OverlapP50Ms, r.FirstViolationMs = 0, 0, -1
	r.Zombies, r.ZombieMaxMs, r.ZombieP50Ms = 0, 0, 0
	if st := r.Store; st != nil {
		// Each lost line is at most one operation: one store operation's
		// increment, or one release that decided whether a pending one
		// committed.
		u.StoreLost, u.StorePhantom = min(st.Lost, lines), min(st.Phantom, lines)
		st.Lost -= u.StoreLost
		st.Phantom -= u.StorePhantom
		if st.Verdict == Ok || (st.Verdict == Violation && st.Lost+st.Phantom == 0) {
			// The committed increments are read from worker lines too.
			st.Verdict = Unknown
		}
	}
	r.Unproven = u
}

// TwoHolders reports whether the case proved two holders (MODEL §6, §12):
// an overlap of holds. In a record that lost worker lines no overlap is
// proven (Result.Unproven): its Violations are none.
func (r *Result) TwoHolders() bool { return r.Violations > 0 }

// Damaged reports whether a late write landed in the case (MODEL §17): a
// stale write the fenced register accepted; a job's effect applied twice,
// or stale (MODEL §20); for a store backend, a lost
// or phantom increment; for a backend with neither tokens nor a store, a
// lost update on the unfenced register. Two holders with no write are
// unsafe, not damage.
func (r *Result) Damaged() bool {
	switch {
	case r.Resource.StaleAccepted > 0, r.Jobs != nil && r.Jobs.Duplicates+r.Jobs.StaleAccepted > 0:
		return true
	case r.Meta.Store:
		return r.Store != nil && r.Store.Lost+r.Store.Phantom > 0
	case !r.Meta.Fenced:
		return r.Resource.LostUpdates > 0
	}
	return false
}

// Resource counts what the protected resource saw.
type Resource struct {
	Verdict Verdict `json:"verdict"`
	Writes  int     `json:"writes"`
	// LostUpdates: unfenced writes based on a value someone else had
	// overwritten since the writer read it.
	LostUpdates int `json:"lost_updates"`
	// StaleRejected: late writes the fenced register refused because
	// their token was lower than one it had already seen (fencing at
	// work); StaleReadsRejected the same for reads.
	StaleRejected      int `json:"stale_rejected"`
	StaleReadsRejected int `json:"stale_reads_rejected"`
	// StaleAccepted: fenced writes that passed the token check although the
	// value had changed since the writer's read: damage fencing let through.
	StaleAccepted int `json:"stale_accepted"`
	// TokenReuse: requests from a different holder with a token equal to
	// the highest seen: the token did not tell two holders apart. Only
	// for backends that issue tokens.
	TokenReuse int `json:"token_reuse"`
}

// Case checks one case. Create it with NewCase, feed it the case's events
// in time order with Add, then call Result once.
type Case struct {
	meta    history.CaseMeta
	start   int64
	lastT   int64
	res     Result
	ended   bool
	endT    int64 // the case-end mark's time, once ended
	stopped bool
	stopT   int64

	clients    map[string]*client
	clientList []*client
	insts      map[string]*instance

	faults    map[string]*faultRec
	faultList []*faultRec
	// awaitGrant are faults that began and whose next grant has not come.
	awaitGrant []*faultRec
	crashes    []string // unexplained deaths (MODEL §12)

	freeHolds []*hold
	// held are the events held back while a kill or pause of an instance
	// waits to be known acting or not (MODEL §4): they are judged once the
	// fault's fault-end (or the case's end) says.
	held     []history.Event
	pending  []*faultRec
	holding  bool
	afterEnd int  // events after case-end (MODEL §2)
	finished bool // a cut-short case was finished by Result
	strays   map[string]int
	sink     func(e *history.Event, counted bool)
	fig      figures

	malformedN    int
	malformedMsgs []string
	posthumous    int
	orderErrs     int
	early         int

	mutex   mutex
	live    liveness
	lin     linCheck
	harness harnessCheck
	store   storeCheck
	jobs    jobCheck
	linRes  *LinResult
}

// Option configures a Case.
type Option func(*Case)

// WithLinearizability makes the case also check the service's history for
// linearizability (MODEL §8), its searches for at most timeout in all.
func WithLinearizability(timeout time.Duration) Option {
	return func(c *Case) {
		if !c.meta.Lockless {
			c.lin.init(c.meta.Fenced, c.meta.LeaseNs, timeout)
		}
	}
}

// WithSink hands every event the case judges, in the order it judges
// them, to fn: counted is false for an event MODEL §3 counts nowhere (a
// posthumous one) and for one after the case's end. It is how figures
// outside the checker (a plot's timeline) see exactly the events the
// checker counted.
func WithSink(fn func(e *history.Event, counted bool)) Option {
	return func(c *Case) { c.sink = fn }
}

// NewCase returns a checker for the case described by meta, whose
// case-start mark was at start.
func NewCase(meta history.CaseMeta, start int64, opts ...Option) *Case {
	c := &Case{
		mutex:   mutex{first: -1},
		meta:    meta,
		start:   start,
		lastT:   start,
		clients: map[string]*client{},
		insts:   map[string]*instance{},
		faults:  map[string]*faultRec{},
	}
	for _, f := range meta.Faults {
		if c.faults[f.Name] != nil {
			c.malformed("fault %s is scheduled twice", f.Name)
			continue
		}
		r := &faultRec{name: f.Name, typ: f.Type, effect: f.EffectOf(), group: f.Group, scheduled: f.Target, acting: true}
		c.faults[f.Name] = r
		c.faultList = append(c.faultList, r)
	}
	c.res.Case = meta.Name
	c.res.Backend = meta.Backend
	// A job workload's clients ask for a job's lock only while the job is
	// to do: availability is not asked by default (MODEL §20); its lost
	// jobs are.
	c.res.Expect = meta.Expect.WithDefaults(meta.Fenced, len(meta.Faults) > 0 && meta.Jobs == nil)
	if meta.Store && c.res.Expect.LostUpdates == nil && !c.res.Expect.Measure && !c.res.Expect.IsAny("lost_updates") {
		no := false // the database is the resource: no update may be lost
		c.res.Expect.LostUpdates = &no
	}
	if meta.Lockless && meta.Expect.Violations == nil {
		// MODEL §13 (A6): mutual exclusion does not apply to a lockless
		// backend, so no default asks it.
		c.res.Expect.Violations = nil
	}
	c.res.Meta = meta
	c.live.init(start, c.res.Expect.Available, c.res.Expect.RecoversWithinNs, meta.ExpiryBoundNs)
	c.fig.init(start)
	c.harness.init(meta)
	c.store.init(meta)
	c.jobs.init(meta, c.malformed, func(inst string) bool {
		in := c.insts[inst]
		return in != nil && in.dead
	})
	for _, o := range opts {
		o(c)
	}
	return c
}

// MetaOf decodes the CaseMeta of a case-start mark.
func MetaOf(e *history.Event) (history.CaseMeta, error) {
	var m history.CaseMeta
	if e.Type != history.Mark || e.F != history.MarkCaseStart {
		return m, fmt.Errorf("event at t=%d is not a case-start mark", e.T)
	}
	// MODEL §2: the meta is held to the record's rules: a field it does
	// not know (a misspelt expectation) is refused, not ignored.
	dec := json.NewDecoder(bytes.NewReader(e.Meta))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("case-start meta: %w", err)
	}
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("case-start meta: %w", err)
	}
	return m, nil
}

// Add feeds one event. Events must come in nondecreasing time order, after
// the case's start; one that goes back in time, or is dated before the
// start, is counted and makes the case invalid (MODEL §2). While a kill or
// a pause of an instance is in force, what it did is known only at its
// end (MODEL §4): the case holds the events back until then, and judges
// them in order.
func (c *Case) Add(e *history.Event) {
	switch {
	case e.T < c.start:
		c.early++
	case e.T < c.lastT:
		c.orderErrs++
	default:
		c.lastT = e.T
	}
	if c.ended {
		c.afterEnd++
		c.emit(e, false)
		return
	}
	c.ingest(e)
}

// ingest judges e, or holds it back behind a fault that is not yet known
// to act.
func (c *Case) ingest(e *history.Event) {
	if c.holding {
		cp := *e
		if len(e.Meta) > 0 {
			cp.Meta = append([]byte(nil), e.Meta...)
		}
		c.held = append(c.held, cp)
		if c.settles(e) {
			c.release()
		}
		return
	}
	if f := c.instanceFault(e); f != nil {
		c.holding = true
		c.pending = append(c.pending[:0], f)
		c.ingest(e)
		return
	}
	c.judge(e)
}

// instanceFault returns the fault a fault-start of a kill or a pause of an
// instance begins (nil for any other event).
func (c *Case) instanceFault(e *history.Event) *faultRec {
	if e.Type != history.Mark || e.F != history.MarkFaultStart {
		return nil
	}
	f := c.faults[e.Fault]
	if f == nil || f.started || f.settled || (f.effect != history.EffectKill && f.effect != history.EffectStop) {
		return nil
	}
	for _, t := range strings.Split(e.Target, ",") {
		if _, ok := instanceOf(t); ok {
			return f
		}
	}
	return nil
}

// settles notes what a held event says of the pending faults, and reports
// whether every one of them is now known to act or not.
func (c *Case) settles(e *history.Event) bool {
	if e.Type != history.Mark {
		return false
	}
	switch e.F {
	case history.MarkCaseEnd:
		c.settleAll()
		return true
	case history.MarkFaultStart:
		if f := c.instanceFault(e); f != nil && f != c.pending[0] && !slices.Contains(c.pending, f) {
			c.pending = append(c.pending, f)
		}
	case history.MarkFaultUnobserved, history.MarkFaultIdle:
		if f := c.faults[e.Fault]; f != nil && slices.Contains(c.pending, f) {
			f.acting = false
		}
	case history.MarkFaultEnd:
		if f := c.faults[e.Fault]; f != nil && slices.Contains(c.pending, f) {
			f.settled = true
			c.pending = slices.DeleteFunc(c.pending, func(p *faultRec) bool { return p == f })
		}
	}
	return len(c.pending) == 0
}

// release judges the events held back, in order; one of them may begin to
// hold events back again.
func (c *Case) release() {
	held := c.held
	c.held, c.holding = nil, false
	for i := range held {
		c.ingest(&held[i])
	}
}

// settleAll takes every pending fault at its word as it stands: the case
// (or its history) ends before they healed.
func (c *Case) settleAll() {
	for _, f := range c.pending {
		f.settled = true
	}
	c.pending = c.pending[:0]
}

// flush judges what is still held back where the history ends.
func (c *Case) flush() {
	if c.holding {
		c.settleAll()
		c.release()
	}
}

// emit hands an event to the sink.
func (c *Case) emit(e *history.Event, counted bool) {
	if c.sink != nil {
		c.sink(e, counted)
	}
}

// judge applies one event to the case's state.
func (c *Case) judge(e *history.Event) {
	if c.ended {
		c.afterEnd++
		c.emit(e, false)
		return
	}
	c.mutex.advance(c, e.T)
	c.live.advance(e.T)
	if e.Type == history.Mark {
		c.store.add(e)
		c.jobs.sinkMark(e) // the sink's record counts whenever it comes (MODEL §20)
		c.mark(e)
		c.emit(e, true)
		return
	}
	cl := c.clients[e.Proc]
	if (cl != nil && cl.inst.dead) || (cl == nil && c.deadProc(e.Proc)) {
		c.posthumous++
		c.emit(e, false)
		return // MODEL §3: a dead instance's events change nothing
	}
	c.store.add(e)
	c.operation(cl, e)
	c.jobs.op(e)
	c.emit(e, true)
}
