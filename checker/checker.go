// Package checker judges a recorded history. It is pure: no I/O, no clocks,
// no goroutines. Feed it a case's events in time order with Add, then read
// Result. Memory is bounded by the number of keys and concurrent holders,
// not by the length of the history, so a run of millions of acquisitions is
// checked in one streaming pass.
//
// # Mutual exclusion
//
// A client believes it holds a key from the moment its acquire returns ok
// until it calls release, or until it learns the lease is lost (a "lost"
// event: the client library's signal, a failed extension, or the lease's
// validity running out), or until its worker instance crashes. Two clients
// whose believed-held intervals on one key overlap are a violation: both may
// act on the protected resource at once. Each new holder that finds k others
// already holding counts k violations.
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
// resource check, which is independent of what clients believe.
//
// # Verdicts
//
// Every check is tri-state. A case whose history stops before its end mark,
// or whose run is invalid (no lock ever acquired, a scheduled fault that
// never fired or failed to apply), is Unknown, never Ok.
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
	// broken), "not-reproduced" (an expected violation did not appear),
	// "invalid" (the run cannot be judged) or "unknown" (incomplete history).
	Status  string   `json:"status"`
	Valid   bool     `json:"valid"`
	Invalid []string `json:"invalid_reasons,omitempty"`
	// Unmet lists each expectation of the scenario that the run broke.
	Unmet []string `json:"unmet_expectations,omitempty"`

	MutualExclusion Verdict   `json:"mutual_exclusion"`
	Violations      int       `json:"violations"`
	Examples        []Overlap `json:"examples,omitempty"`

	Resource Resource `json:"resource"`

	AcquiresOK      int `json:"acquires_ok"`
	AcquiresFailed  int `json:"acquires_failed"`
	AcquiresUnknown int `json:"acquires_unknown"`
	// ReleasesNotHeld counts releases refused because the lock was no
	// longer the caller's: the idempotent, token-checked release at work.
	ReleasesNotHeld int `json:"releases_not_held"`
	LeasesLost      int `json:"leases_lost"`
	// WrongTokenReleases counts releases with a wrong token that the
	// backend accepted (removing a lock that was not the caller's).
	WrongTokenReleases int `json:"wrong_token_releases_accepted"`
	// TokenRegressions counts acquisitions whose fencing token was not
	// higher than an earlier holder's on the same key (a counter reset by
	// a failover or a restart without persistence). 0 for tokenless backends.
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
	// StaleRejected: requests the fenced register refused because their
	// token was lower than one it had already seen (fencing at work).
	StaleRejected int `json:"stale_rejected"`
	// StaleAccepted: fenced writes that passed the token check although the
	// value had changed since the writer's read: damage fencing let through.
	StaleAccepted int `json:"stale_accepted"`
	// TokenReuse: requests from a different holder with a token equal to
	// the highest seen: the token did not tell two holders apart.
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
	meta      history.CaseMeta
	maxToken  map[string]uint64 // key -> highest token granted
	holders   map[string][]holder
	res       Result
	ended     bool
	started   map[string]bool // scheduled faults that fired
	errored   map[string]string
	open      []pending
	lastT     int64
	orderErrs int
}

// NewCase returns a checker for the case described by meta.
func NewCase(meta history.CaseMeta) *Case {
	c := &Case{
		meta:     meta,
		holders:  make(map[string][]holder),
		started:  make(map[string]bool),
		errored:  make(map[string]string),
		maxToken: make(map[string]uint64),
	}
	c.res.Segments = []Segment{{Start: 0}}
	c.res.Case = meta.Name
	c.res.Backend = meta.Backend
	c.res.Expect = meta.Expect
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

// Add feeds one event. Events must come in nondecreasing time order; one
// that goes back in time is counted and makes the verdict Unknown.
func (c *Case) Add(e *history.Event) {
	if e.T < c.lastT {
		c.orderErrs++
	} else {
		c.lastT = e.T
	}
	switch e.Type {
	case history.OK:
		switch e.F {
		case history.OpAcquire:
			c.res.AcquiresOK++
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
			c.res.AcquiresFailed++
		case history.OpRelease:
			c.res.ReleasesNotHeld++
		}
	case history.Info:
		if e.F == history.OpAcquire {
			c.res.AcquiresUnknown++
		}
	case history.Invoke:
		if e.F == history.OpRelease {
			c.drop(e.Key, e.Proc, e.T)
		}
	case history.Mark:
		c.mark(e)
	}
}

func (c *Case) grant(e *history.Event) {
	if e.Token > 0 {
		if e.Token <= c.maxToken[e.Key] {
			c.res.TokenRegressions++
		} else {
			c.maxToken[e.Key] = e.Token
		}
	}
	hs := c.holders[e.Key]
	for _, h := range hs {
		if h.proc == e.Proc {
			continue // a client re-acquiring what it holds is not two holders
		}
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
	case history.MarkCaseEnd:
		c.ended = true
	case history.MarkFaultStart:
		c.started[e.Fault] = true
		c.res.FaultsFired++
		c.res.Segments = append(c.res.Segments, Segment{Start: e.T})
	case history.MarkFaultEnd:
		c.res.Segments = append(c.res.Segments, Segment{Start: e.T})
	case history.MarkFaultError:
		c.errored[e.Fault] = e.Err
	case history.MarkCrash:
		c.res.Crashes++
		prefix := e.Proc + "c"
		for key, hs := range c.holders {
			for i := 0; i < len(hs); {
				if strings.HasPrefix(hs[i].proc, prefix) {
					c.closeExamples(key, hs[i].proc, e.T)
					hs[i] = hs[len(hs)-1]
					hs = hs[:len(hs)-1]
					continue
				}
				i++
			}
			c.holders[key] = hs
		}
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
			r.StaleRejected++
		case history.FencedStale:
			r.StaleAccepted++
		}
		if e.Reuse {
			r.TokenReuse++
		}
	}
}

// Result finishes the check and returns the verdicts.
func (c *Case) Result() Result {
	r := c.res
	for _, f := range c.meta.Faults {
		if msg, bad := c.errored[f.Name]; bad {
			r.Invalid = append(r.Invalid, fmt.Sprintf("fault %s could not be applied: %s", f.Name, msg))
		} else if !c.started[f.Name] {
			r.Invalid = append(r.Invalid, fmt.Sprintf("fault %s (%s on %s) never fired", f.Name, f.Type, f.Target))
		}
	}
	if r.AcquiresOK == 0 {
		r.Invalid = append(r.Invalid, "no lock was ever acquired: the run did no work")
	}
	if c.orderErrs > 0 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%d events out of time order", c.orderErrs))
	}
	r.Valid = len(r.Invalid) == 0

	r.MutualExclusion = Ok
	if r.Violations > 0 {
		r.MutualExclusion = Violation
	}
	r.Resource.Verdict = Ok
	if r.Resource.LostUpdates > 0 || r.Resource.StaleAccepted > 0 {
		r.Resource.Verdict = Violation
	}

	switch {
	case !c.ended:
		r.Status = "unknown"
		r.Invalid = append(r.Invalid, "history ends before the case did")
		r.Valid = false
	case !r.Valid:
		r.Status = "invalid"
	}
	if r.Status != "" {
		// A verdict of "nothing found" from a run that cannot be judged is
		// not evidence of safety.
		if r.MutualExclusion == Ok {
			r.MutualExclusion = Unknown
		}
		if r.Resource.Verdict == Ok {
			r.Resource.Verdict = Unknown
		}
		return r
	}

	r.Unmet = unmet(r)
	r.Status = "ok"
	for _, u := range r.Unmet {
		if strings.HasPrefix(u, "unexpected") {
			r.Status = "violation"
			break
		}
		r.Status = "not-reproduced"
	}
	return r
}

func unmet(r Result) []string {
	var out []string
	check := func(want *bool, got int, what string) {
		if want == nil {
			return
		}
		switch {
		case *want && got == 0:
			out = append(out, fmt.Sprintf("expected %s, found none", what))
		case !*want && got > 0:
			out = append(out, fmt.Sprintf("unexpected %s: %d", what, got))
		}
	}
	check(r.Expect.Violations, r.Violations, "mutual-exclusion violations")
	check(r.Expect.StaleAccepted, r.Resource.StaleAccepted, "stale writes accepted by the fenced resource")
	check(r.Expect.LostUpdates, r.Resource.LostUpdates, "lost updates on the unfenced resource")
	return out
}
