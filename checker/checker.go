// Package checker judges a recorded history. It is pure: no I/O, no clocks,
// no goroutines. Feed it a case's events in time order with Add, then read
// Result. Memory is bounded by the number of keys, clients and faults, not
// by the length of the history, so a run of millions of acquisitions is
// checked in one streaming pass.
//
// # Mutual exclusion
//
// A client believes it holds a key from the moment its acquire returns ok
// until it calls release, or until it learns the lease is lost (a "lost"
// event: the client library's signal, a failed extension, or the lease's
// validity running out), or until its worker instance dies (from the
// instant a kill fault was applied to it, or the crash mark). A grant of a
// key the client already holds (a duplicated reply, a re-entrant lock) is
// one hold, not two. Two clients whose believed-held intervals on one key
// overlap are a violation: both may act on the protected resource at once.
// Each new holder that finds k others already holding counts k violations.
//
// # Unknown outcomes
//
// An acquire that timed out or errored (type info) has an unknown outcome:
// the server may have granted it. Its client does not believe it holds the
// lock and never enters the critical section, so it creates no believed-held
// interval and cannot itself be part of a violation. It is not silently
// dropped either: unknown acquires are counted and reported, because a lock
// granted behind a timed-out reply still blocks other clients until its TTL
// runs out (a liveness cost), and any damage it could cause would show in the
// resource check, which is independent of what clients believe. An acquire
// still in flight when its instance dies, or when the case ends, is unknown
// too.
//
// # Verdicts
//
// Every check is tri-state. A case whose history stops before its end mark,
// or whose run is invalid (no lock ever acquired, a scheduled fault that
// never fired, failed to apply or had no effect the run could see, a worker
// that died with no fault killing it, events out of order or before the
// case began, a harness that was itself the bottleneck), has Unknown
// verdicts, never Ok: a run that cannot be judged is not evidence of safety.
// A violation it did prove still counts, and wins: unsafety seen in an
// invalid run is still unsafety.
package checker

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/internal/history"
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
	Status  string   `json:"status"`
	Valid   bool     `json:"valid"`
	Invalid []string `json:"invalid_reasons,omitempty"`
	// Unmet lists each expectation of the scenario that the run broke.
	Unmet []string `json:"unmet_expectations,omitempty"`

	MutualExclusion Verdict   `json:"mutual_exclusion"`
	Violations      int       `json:"violations"`
	Examples        []Overlap `json:"examples,omitempty"`

	Resource Resource `json:"resource"`
	// Store judges a critical section run in the backend's own database
	// (nil for the others); its lost increments count as lost updates.
	Store    *Store   `json:"store,omitempty"`
	Liveness Liveness `json:"liveness"`
	Harness  Harness  `json:"harness"`

	AcquiresOK      int `json:"acquires_ok"`
	AcquiresFailed  int `json:"acquires_failed"`
	AcquiresUnknown int `json:"acquires_unknown"`
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
	// Segments count violations between fault marks, so that results can
	// split them into before / during / after each fault window.
	Segments []Segment `json:"-"`
}

// Segment is the stretch of a case from one fault mark to the next.
type Segment struct {
	Start      int64
	Violations int
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

type holder struct {
	proc  string
	since int64
	token uint64
}

type pending struct {
	idx  int // index into examples
	a, b string
	key  string
}

// Case checks one case. Create it with NewCase, feed it the case's events in
// time order with Add, then call Result once.
type Case struct {
	meta       history.CaseMeta
	start      int64
	maxToken   map[string]uint64 // key -> highest token granted
	holders    map[string][]holder
	acquiring  map[string]bool // procs with an acquire in flight
	res        Result
	ended      bool
	started    map[string]bool // scheduled faults that fired
	errored    map[string]string
	unobserved map[string]string
	faultType  map[string]string // fault name -> type
	killed     map[string]bool   // instances ("i2") a kill fault hit
	crashes    []string          // crashes no fault explains
	open       []pending
	lastT      int64
	orderErrs  int
	early      int
	live       liveness
	harness    harnessCheck
	store      storeCheck
}

// NewCase returns a checker for the case described by meta, whose
// case-start mark was at start.
func NewCase(meta history.CaseMeta, start int64) *Case {
	c := &Case{
		meta:       meta,
		start:      start,
		lastT:      start,
		holders:    make(map[string][]holder),
		acquiring:  make(map[string]bool),
		started:    make(map[string]bool),
		errored:    make(map[string]string),
		unobserved: make(map[string]string),
		faultType:  make(map[string]string),
		killed:     make(map[string]bool),
		maxToken:   make(map[string]uint64),
	}
	for _, f := range meta.Faults {
		c.faultType[f.Name] = f.Type
	}
	c.live.init(start)
	c.harness.init(meta)
	c.store.init(meta)
	c.res.Segments = []Segment{{Start: start}}
	c.res.Case = meta.Name
	c.res.Backend = meta.Backend
	c.res.Expect = meta.Expect.WithDefaults(meta.Fenced, len(meta.Faults) > 0)
	if meta.Store && c.res.Expect.LostUpdates == nil {
		no := false // the database is the resource: no update may be lost
		c.res.Expect.LostUpdates = &no
	}
	c.res.Meta = meta
	return c
}

// MetaOf decodes the CaseMeta of a case-start mark.
func MetaOf(e *history.Event) (history.CaseMeta, error) {
	var m history.CaseMeta
	if e.Type != history.Mark || e.F != history.MarkCaseStart {
		return m, fmt.Errorf("event at t=%d is not a case-start mark", e.T)
	}
	if err := json.Unmarshal(e.Meta, &m); err != nil {
		return m, fmt.Errorf("case-start meta: %w", err)
	}
	if m.Name == "" {
		return m, fmt.Errorf("case-start meta has no case name")
	}
	return m, nil
}

// Add feeds one event. Events must come in nondecreasing time order, after
// the case's start; one that goes back in time, or is dated before the
// start, is counted and makes the case invalid.
func (c *Case) Add(e *history.Event) {
	switch {
	case e.T < c.start:
		c.early++
	case e.T < c.lastT:
		c.orderErrs++
	default:
		c.lastT = e.T
	}
	c.store.add(e)
	switch e.Type {
	case history.OK:
		switch e.F {
		case history.OpAcquire:
			delete(c.acquiring, e.Proc)
			c.res.AcquiresOK++
			c.live.acquired(e.T)
			c.grant(e)
		case history.OpLost:
			c.res.LeasesLost++
			c.drop(e.Key, e.Proc, e.T)
		case history.OpForeignRelease:
			c.res.WrongTokenReleases++
		}
	case history.Fail:
		switch e.F {
		case history.OpAcquire:
			delete(c.acquiring, e.Proc)
			c.res.AcquiresFailed++
		case history.OpRelease:
			c.res.ReleasesNotHeld++
		}
	case history.Info:
		switch e.F {
		case history.OpAcquire:
			delete(c.acquiring, e.Proc)
			c.res.AcquiresUnknown++
		case history.OpResource:
			c.harness.resourceError(e.T)
		}
	case history.Invoke:
		switch e.F {
		case history.OpAcquire:
			c.acquiring[e.Proc] = true
		case history.OpRelease:
			c.drop(e.Key, e.Proc, e.T)
		}
	case history.Mark:
		c.mark(e)
	}
}

func (c *Case) grant(e *history.Event) {
	if c.meta.Lockless {
		return // no lock: every client "holds" at once, by design
	}
	if e.Token > 0 {
		if e.Token <= c.maxToken[e.Key] {
			c.res.TokenRegressions++
		} else {
			c.maxToken[e.Key] = e.Token
		}
	}
	hs := c.holders[e.Key]
	for i, h := range hs {
		if h.proc == e.Proc {
			// Granted what it already holds: still one hold, now with the
			// newer token. Keeping two would leave a phantom holder after
			// its one release.
			c.res.DuplicateGrants++
			hs[i].token = e.Token
			return
		}
	}
	for _, h := range hs {
		c.res.Violations++
		c.res.Segments[len(c.res.Segments)-1].Violations++
		if len(c.res.Examples) < MaxExamples {
			c.res.Examples = append(c.res.Examples, Overlap{
				Key: e.Key, First: h.proc, FirstSince: h.since, FirstToken: h.token,
				Second: e.Proc, SecondSince: e.T, SecondToken: e.Token, Until: -1,
			})
			c.open = append(c.open, pending{idx: len(c.res.Examples) - 1, a: h.proc, b: e.Proc, key: e.Key})
		}
	}
	c.holders[e.Key] = append(hs, holder{proc: e.Proc, since: e.T, token: e.Token})
}

// drop ends proc's believed hold on key at time t.
func (c *Case) drop(key, proc string, t int64) {
	hs := c.holders[key]
	for i, h := range hs {
		if h.proc == proc {
			hs[i] = hs[len(hs)-1]
			c.holders[key] = hs[:len(hs)-1]
			c.closeExamples(key, proc, t)
			return
		}
	}
}

// dropInstance ends every hold of instance inst ("i2") at time t, and makes
// its acquires in flight unknown: a dead client believes nothing, and what
// it asked for may or may not have been granted.
func (c *Case) dropInstance(inst string, t int64) {
	prefix := inst + "c"
	c.store.dropInstance(inst)
	for key, hs := range c.holders {
		for i := 0; i < len(hs); {
			if strings.HasPrefix(hs[i].proc, prefix) {
				c.closeExamples(key, hs[i].proc, t)
				hs[i] = hs[len(hs)-1]
				hs = hs[:len(hs)-1]
				continue
			}
			i++
		}
		c.holders[key] = hs
	}
	for proc := range c.acquiring {
		if strings.HasPrefix(proc, prefix) {
			delete(c.acquiring, proc)
			c.res.AcquiresUnknown++
		}
	}
}

func (c *Case) closeExamples(key, proc string, t int64) {
	if len(c.open) == 0 {
		return
	}
	kept := c.open[:0]
	for _, p := range c.open {
		if p.key == key && (p.a == proc || p.b == proc) {
			c.res.Examples[p.idx].Until = t
			continue
		}
		kept = append(kept, p)
	}
	c.open = kept
}

func (c *Case) mark(e *history.Event) {
	switch e.F {
	case history.MarkCaseStop:
		c.live.caseStop(e.T)
	case history.MarkCaseEnd:
		c.ended = true
		c.live.caseEnd(e.T)
	case history.MarkFaultStart:
		c.started[e.Fault] = true
		c.res.FaultsFired++
		c.res.Segments = append(c.res.Segments, Segment{Start: e.T})
		c.live.faultStart(e.Fault, e.Target, e.T)
		c.harness.faultStart(e.T)
		// A kill ends its instance's holds the moment it is applied: a
		// backend that frees the lock on disconnect may grant it before
		// the coordinator reaps the process.
		if c.faultType[e.Fault] == "kill" {
			if n, ok := strings.CutPrefix(e.Target, "instance-"); ok {
				c.killed["i"+n] = true
				c.dropInstance("i"+n, e.T)
			}
		}
	case history.MarkFaultEnd:
		c.res.Segments = append(c.res.Segments, Segment{Start: e.T})
		c.live.faultEnd(e.Fault, e.T)
		c.harness.faultEnd(e.T)
	case history.MarkFaultError:
		c.errored[e.Fault] = e.Err
	case history.MarkFaultUnobserved:
		c.unobserved[e.Fault] = e.Err
	case history.MarkCrash:
		c.res.Crashes++
		if e.Fault == "" && !c.killed[e.Proc] {
			msg := e.Err
			if msg == "" {
				msg = "no exit status"
			}
			if c.live.stopped {
				// Asked to stop, it did not exit cleanly (the runner says
				// why: killed because it would not stop, a client call
				// having outlived its deadline, or an exit status). What
				// it did after the stop is unknown.
				c.crashes = append(c.crashes, fmt.Sprintf("instance %s did not exit cleanly when the case ended (%s)", e.Proc, msg))
			} else {
				c.crashes = append(c.crashes, fmt.Sprintf("instance %s died with no fault killing it (%s)", e.Proc, msg))
			}
		}
		c.dropInstance(e.Proc, e.T)
	case history.MarkHarness:
		c.harness.stats(e)
	case history.MarkResRead, history.MarkResWrite:
		r := &c.res.Resource
		if e.F == history.MarkResWrite {
			r.Writes++
			if e.Lost {
				r.LostUpdates++
			}
		}
		switch e.Fenced {
		case history.FencedRejected:
			if e.F == history.MarkResWrite {
				r.StaleRejected++
			} else {
				r.StaleReadsRejected++
			}
		case history.FencedStale:
			r.StaleAccepted++
		}
		if e.Reuse && c.meta.Fenced {
			r.TokenReuse++
		}
		if e.Late {
			c.harness.late(e.T)
		}
	}
}
