package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Truth is what MODEL.md says of a run's history.
type Truth struct {
	Seed        uint64 `json:"seed"`
	Describe    string `json:"describe"`
	Journal     bool   `json:"journal"` // the history is read with its tail journal
	Refused     bool   `json:"refused"` // a bad line: the whole history is refused (exit 104)
	RefusedLine int    `json:"refused_line,omitempty"`
	RefusedWhat string `json:"refused_what,omitempty"`
	ExitCode    int    `json:"exit_code"`
	// ExitCodeAny: the exit code is not compared, and why.
	ExitCodeAny string          `json:"exit_code_any,omitempty"`
	Cases       []*CaseTruth    `json:"cases"`
	Rows        []*RowTruth     `json:"rows"`
	Decision    []*BackendTruth `json:"decision"`
	Envelope    []*EnvelopeLine `json:"envelope,omitempty"`
}

// Rate is k of n decided trials with its 95% Wilson interval (MODEL §17).
type Rate struct {
	Hits int     `json:"hits"`
	Of   int     `json:"of"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// wilson: MODEL §17's formula, z = 1.959964.
func wilson(k, n int) Rate {
	r := Rate{Hits: k, Of: n}
	if n == 0 {
		return r
	}
	const z = 1.959964
	nf := float64(n)
	p := float64(k) / nf
	d := 1 + z*z/nf
	centre := (p + z*z/(2*nf)) / d
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / d
	r.Low, r.High = max(0, centre-half), min(1, centre+half)
	if k == 0 {
		r.Low = 0
	}
	if k == n {
		r.High = 1
	}
	return r
}

type RowTruth struct {
	Row     string `json:"row"`
	Backend string `json:"backend"`
	Verdict string `json:"verdict"`
	Met     int    `json:"met"`
	Trials  int    `json:"trials"`
	Need    int    `json:"need"`
	// Invalid: present trials that could not be judged (invalid or cut
	// short); Missing: trial numbers the history does not hold.
	Invalid      int               `json:"invalid"`
	Missing      int               `json:"missing"`
	Decided      int               `json:"decided"`
	Exposures    int               `json:"exposures"`
	TwoHolders   Rate              `json:"two_holders"`
	OverlapMaxNs int64             `json:"overlap_max_ns"`
	ZombieMaxNs  int64             `json:"zombie_max_ns"`
	Sweep        *SweepPoint       `json:"sweep,omitempty"`
	Any          map[string]string `json:"any,omitempty"`
	Detail       string            `json:"detail,omitempty"`
}

// Truth works out the verdicts of the run's history as the checker reads
// it: with its tail journal merged when withJournal (AnalyzeFile), or the
// history file alone (Analyze).
func (r *Run) Truth(withJournal bool) *Truth {
	r.Files() // numbers the bad line
	t := &Truth{Seed: r.Seed, Describe: r.Describe(), Journal: withJournal && r.HasJournal()}
	if r.bad != nil {
		t.Refused, t.RefusedLine, t.RefusedWhat, t.ExitCode = true, r.bad.line, r.bad.what, 104
		return t
	}
	if r.pre != nil {
		t.Refused, t.RefusedLine, t.RefusedWhat, t.ExitCode = true, 1, "an event before the first case-start", 104
		return t
	}
	cut := r.visible(withJournal)
	for i, cr := range r.Cases {
		if cr.startIdx >= cut {
			break
		}
		for _, v := range cr.views() {
			t.Cases = append(t.Cases, v.truth(r.Events, cut, i))
		}
	}
	t.Rows = rowTruths(t.Cases)
	t.judgeExit()
	t.Decision = decision(t.Cases)
	t.Envelope = envelope(t.Rows)
	return t
}

// TruthTwice is what MODEL.md says of the run's history written twice
// into one file (A5: a run repeated is one run): every trial's number
// repeats, so each row is invalid unless a trial was unsafe or not live,
// and each trial counts once in the rows, the cells and the envelope.
// ok is false for a history that is refused, has a bad line or is cut
// short: written twice, it would not be the same history twice.
func (r *Run) TruthTwice() (t *Truth, ok bool) {
	if r.cut != nil || r.bad != nil || r.pre != nil {
		return nil, false
	}
	t = r.Truth(false)
	twice := append(append([]*CaseTruth(nil), t.Cases...), t.Cases...)
	t.Rows = rowTruths(twice)
	t.ExitCodeAny = ""
	t.judgeExit()
	t.Envelope = envelope(t.Rows)
	return t, true
}

// judgeExit: the exit code from the rows, then the thresholds (MODEL §14,
// §19).
func (t *Truth) judgeExit() {
	t.ExitCode = exitCode(t.Rows)
	if t.ExitCode == 0 {
		for _, c := range t.Cases {
			for _, th := range c.Thresholds {
				switch {
				case th.Any != "" || th.PassAny != "":
					if t.ExitCode != 99 {
						t.ExitCodeAny = "a threshold whose verdict is not compared: " + th.Source
					}
				case !th.Pass:
					t.ExitCode = 99 // a threshold failed (MODEL §14, §19)
					t.ExitCodeAny = ""
				}
			}
		}
	}
	for _, c := range t.Cases {
		if c.Skip != "" {
			t.ExitCodeAny = "case " + c.Name + " is not compared: " + c.Skip
		}
	}
}

// rowTruths: MODEL §14, and a row's evidence (§16, §17).
func rowTruths(cases []*CaseTruth) []*RowTruth {
	var order []string
	rows := map[string][]*CaseTruth{}
	for _, ct := range cases {
		m := ct.meta
		name := m.Row
		if name == "" {
			name = m.Name
		}
		if rows[name] == nil {
			order = append(order, name)
		}
		rows[name] = append(rows[name], ct)
	}
	var out []*RowTruth
	for _, name := range order {
		ms := rows[name]
		rt := &RowTruth{Row: name, Backend: ms[0].meta.Backend, Any: map[string]string{}, Sweep: ms[0].meta.Sweep}
		T, N := 1, 1
		if ms[0].meta.Row != "" {
			T, N = ms[0].meta.Trials, ms[0].meta.Need
		}
		shape := ""
		seen := map[int]bool{}
		for _, m := range ms {
			tr := 1
			if m.meta.Row != "" {
				tr = m.meta.Trial
				if m.meta.Trials != T || m.meta.Need != N {
					shape = "trials disagree on trials or need"
				}
			}
			if seen[tr] {
				shape = fmt.Sprintf("trial %d repeated", tr)
			}
			seen[tr] = true
		}
		rt.Trials, rt.Need = T, N
		unsafe, notLive, undecided := 0, 0, 0
		hits, twoOf := 0, 0
		counted := map[*CaseTruth]bool{}
		for _, m := range ms {
			if counted[m] {
				// §14 (A5): the same trial again (the history written
				// twice): it repeats its number, and counts once
				continue
			}
			counted[m] = true
			if m.Skip != "" {
				rt.Any["verdict"], rt.Any["met"], rt.Any["invalid"] = m.Skip, m.Skip, m.Skip
				rt.Any["evidence"] = m.Skip
			}
			switch m.Status {
			case "ok":
				rt.Met++
			case "violation":
				unsafe++
			case "unavailable":
				notLive++
			case "invalid", "unknown":
				undecided++
				rt.Invalid++
			}
			if m.Decided {
				rt.Decided++
				rt.Exposures += m.Exposures
				if m.twoHolders() {
					hits++
				}
				// §17: the two-holders rate is over the trials that can
				// answer for it: valid, or showing two holders
				if m.Valid || m.twoHolders() {
					twoOf++
				}
				rt.OverlapMaxNs = max(rt.OverlapMaxNs, m.OverlapMaxNs)
				rt.ZombieMaxNs = max(rt.ZombieMaxNs, m.ZombieMaxNs)
				for _, f := range []string{"overlap_max_ms", "zombie_max_ms", "exposures"} {
					if w, ok := m.Any[f]; ok {
						rt.Any[f] = m.Name + ": " + w
					}
				}
			}
		}
		rt.TwoHolders = wilson(hits, twoOf)
		for tr := 1; tr <= T; tr++ {
			if !seen[tr] {
				rt.Missing++
			}
		}
		undecided += rt.Missing
		if shape != "" {
			rt.Any["trials"], rt.Any["need"], rt.Any["met"] = shape, shape, shape
			rt.Any["missing"], rt.Any["invalid"] = shape, shape
		}
		switch {
		case unsafe > 0:
			rt.Verdict = "violation"
		case notLive > 0:
			rt.Verdict = "unavailable"
		case undecided > 0 || shape != "":
			rt.Verdict = "invalid"
		case rt.Met >= N:
			rt.Verdict = "reproduced"
		default:
			rt.Verdict = "not-reproduced"
		}
		rt.Detail = fmt.Sprintf("met %d, unsafe %d, not live %d, undecided %d (missing %d) of %d, need %d %s", rt.Met, unsafe, notLive, undecided, rt.Missing, T, N, shape)
		out = append(out, rt)
	}
	return out
}

// exitCode: MODEL §14, first match wins over the rows.
func exitCode(rows []*RowTruth) int {
	has := func(v string) bool {
		for _, r := range rows {
			if r.Verdict == v {
				return true
			}
		}
		return false
	}
	switch {
	case has("violation"):
		return 100
	case has("invalid"):
		return 101
	case has("unavailable"):
		return 103
	case has("not-reproduced"):
		return 102
	}
	return 0
}

// BackendTruth is a backend's row of the decision view (MODEL §18).
type BackendTruth struct {
	Backend string                `json:"backend"`
	Cells   map[string]*CellTruth `json:"cells"`
	// what it costs without faults: medians over its valid no-fault
	// cases (how many: NoFaultCases)
	NoFaultP50Ns     int64             `json:"no_fault_p50_ns"`
	NoFaultP99Ns     int64             `json:"no_fault_p99_ns"`
	NoFaultPerS      float64           `json:"no_fault_acquisitions_per_s"`
	NoFaultHandoffNs int64             `json:"handoff_p50_ns"`
	NoFaultCases     int               `json:"no_fault_cases"`
	Any              map[string]string `json:"any,omitempty"`
}

// CellTruth is one backend under one class (MODEL §18).
type CellTruth struct {
	Outcome          string            `json:"outcome"`
	Cases            int               `json:"cases"`
	Invalid          int               `json:"invalid"`
	Trials           int               `json:"trials"`
	Exposures        int               `json:"exposures"`
	TwoHolders       Rate              `json:"two_holders"`
	Damage           Rate              `json:"damage"`
	Violations       int               `json:"violations"`
	StaleRejected    int               `json:"stale_rejected"`
	StaleAccepted    int               `json:"stale_accepted"`
	LostUpdates      int               `json:"lost_updates"`
	TokenRegressions int               `json:"token_regressions"`
	AcqDuring        int               `json:"acquisitions_during"`
	AcqAfter         int               `json:"acquisitions_after"`
	LongestGapNs     int64             `json:"longest_gap_ns"`
	RecoveredNs      int64             `json:"recovered_after_ns"`
	NotLive          int               `json:"not_live"`
	OverlapMaxNs     int64             `json:"overlap_max_ns"`
	ZombieMaxNs      int64             `json:"zombie_max_ns"`
	TooFew           bool              `json:"too_few"`
	Any              map[string]string `json:"any,omitempty"`
}

// damage: a late write landed (MODEL §17): a stale write the fenced
// register accepted, or, for a backend with neither tokens nor a store, a
// lost update on the unfenced register. (A fenced backend's lost updates
// are the unfenced register's: not damage; two holders with no write are
// none either. The simulator has no store backend.)
func (t *CaseTruth) damage() bool {
	return t.Resource.StaleAccepted > 0 || (!t.Fenced && t.Resource.LostUpdates > 0)
}

func decision(cases []*CaseTruth) []*BackendTruth {
	var out []*BackendTruth
	byB := map[string]*BackendTruth{}
	members := map[*CellTruth][]*CaseTruth{}
	for _, c := range cases {
		b := byB[c.Backend]
		if b == nil {
			b = &BackendTruth{Backend: c.Backend, Cells: map[string]*CellTruth{}, Any: map[string]string{}}
			byB[c.Backend] = b
			out = append(out, b)
		}
		cell := b.Cells[c.Class]
		if cell == nil {
			cell = &CellTruth{Any: map[string]string{}}
			b.Cells[c.Class] = cell
		}
		members[cell] = append(members[cell], c)
	}
	for _, b := range out {
		for class, cell := range b.Cells {
			cell.fill(class, members[cell])
		}
		b.noFault(cases)
	}
	return out
}

func (cell *CellTruth) fill(class string, cs []*CaseTruth) {
	anyf := func(f, why string) { cell.Any[f] = why }
	hits, dmg, regressed, judged, unservedRecovery, unfenced := 0, 0, false, false, false, false
	hitsOf, dmgOf := 0, 0
	for _, c := range cs {
		cell.Cases++
		if c.Skip != "" {
			for _, f := range []string{"outcome", "invalid", "trials", "exposures", "two_holders", "damage", "violations", "stale_rejected",
				"stale_accepted", "lost_updates", "token_regressions", "acquisitions_during", "acquisitions_after", "longest_gap_ms",
				"recovered_after_ms", "not_live", "overlap_max_ms", "zombie_max_ms", "too_few"} {
				anyf(f, c.Name+": "+c.Skip)
			}
		}
		if !c.Valid {
			cell.Invalid++
		}
		if c.TokenRegressions > 0 && (c.Decided || c.Readable) {
			// §18 (A7): a regression is two grants the record shows,
			// proven in any readable trial, decided or not
			regressed = true
			cell.TokenRegressions += c.TokenRegressions
		}
		if !c.Decided {
			continue
		}
		cell.Trials++
		unfenced = unfenced || !c.Fenced
		cell.Exposures += c.Exposures
		if c.twoHolders() {
			hits++
		}
		if c.damage() {
			dmg++
		}
		// §17: each rate over the trials that can answer for it: the
		// valid ones, and the invalid ones that proved that outcome
		if c.Valid || c.twoHolders() {
			hitsOf++
		}
		if c.Valid || c.damage() {
			dmgOf++
		}
		cell.Violations += c.Violations
		cell.StaleRejected += c.Resource.StaleRejected
		cell.StaleAccepted += c.Resource.StaleAccepted
		cell.LostUpdates += c.Resource.LostUpdates
		cell.OverlapMaxNs = max(cell.OverlapMaxNs, c.OverlapMaxNs)
		cell.ZombieMaxNs = max(cell.ZombieMaxNs, c.ZombieMaxNs)
		for f, cf := range map[string]string{"overlap_max_ms": "overlap_max_ms", "zombie_max_ms": "zombie_max_ms", "exposures": "exposures"} {
			if w, ok := c.Any[cf]; ok {
				anyf(f, c.Name+": "+w)
			}
		}
		if c.LongestGapNs < 0 {
			anyf("longest_gap_ms", c.Name+": the gap is not defined")
		}
		cell.LongestGapNs = max(cell.LongestGapNs, c.LongestGapNs)
		if c.Status == "unavailable" {
			cell.NotLive++
		}
		cell.AcqDuring += c.AcqDuringFaults
		cell.AcqAfter += c.AcqAfterFaults
		for _, f := range c.Faults {
			if !f.Started {
				continue
			}
			if f.Verdict == Any {
				anyf("recovered_after_ms", c.Name+" "+f.Fault+": its verdict is not known")
			}
			if f.StayedDown {
				// §18: the slowest recovery leaves out a fault judged for
				// available: false (§11: it has no recovery time)
				continue
			}
			if f.JudgedAt != "" {
				if !c.Valid {
					anyf("recovered_after_ms", c.Name+": a judged fault in a case not valid")
				}
				judged = true
				if f.Verdict == "unmet" && f.RecoveredNs < 0 {
					// unmet with a relevant key never served again (an
					// undecided fault says nothing of never)
					unservedRecovery = true
				}
				cell.RecoveredNs = max(cell.RecoveredNs, f.RecoveredNs)
			}
		}
	}
	if unservedRecovery {
		cell.RecoveredNs = -1
	}
	if !judged {
		anyf("recovered_after_ms", "no judged fault: MODEL §18 gives no value")
	}
	cell.TwoHolders = wilson(hits, hitsOf)
	cell.Damage = wilson(dmg, dmgOf)
	switch {
	case dmg > 0:
		cell.Outcome = "damage done"
	case hits > 0 && unfenced:
		// neither tokens nor a store: nothing stops a late write
		cell.Outcome = "unsafe, unfenced"
	case hits > 0 && cell.StaleRejected > 0:
		// the fence seen at work: a stale write rejected
		cell.Outcome = "unsafe, fenced"
	case hits > 0:
		cell.Outcome = "unsafe, fence untested"
	case cell.Trials == 0:
		cell.Outcome = "no evidence"
	case regressed:
		cell.Outcome = "safe, tokens regressed"
	default:
		cell.Outcome = "safe"
	}
	n := cell.Exposures
	if class == "no fault" || class == "client misuse" || cell.Trials < n {
		n = cell.Trials
	}
	// MODEL §18: a safe cell (or safe, tokens regressed) on fewer than
	// 10 exposures or 10 decided trials; a cell with no decided trial has
	// no evidence instead
	cell.TooFew = (cell.Outcome == "safe" || cell.Outcome == "safe, tokens regressed") && n < 10
}

// noFault: a backend's costs without faults (MODEL §18).
func (b *BackendTruth) noFault(cases []*CaseTruth) {
	// §18: the medians (of an even count the worse middle value) over the
	// valid no-fault cases of the
	// backend, every lane, of their acquire p50, p99 and throughput, and
	// of the hand-off p50 of those with a hand-off
	var p50, p99, hand []int64
	var rate []float64
	for _, c := range cases {
		if c.Backend != b.Backend || c.Class != "no fault" || !c.Valid || c.Skip != "" {
			continue
		}
		if c.AcquireLatency.Count > 0 {
			p50 = append(p50, c.AcquireLatency.P50Ns)
			p99 = append(p99, c.AcquireLatency.P99Ns)
		}
		rate = append(rate, c.Throughput)
		if c.Handoff.Count > 0 {
			hand = append(hand, c.Handoff.P50Ns)
		}
	}
	b.NoFaultCases = len(rate)
	switch {
	case len(rate) == 0:
		b.Any["no_fault"] = "no valid no-fault case"
	default:
		b.NoFaultP50Ns, b.NoFaultP99Ns = upperMedian(p50), upperMedian(p99)
		sort.Float64s(rate)
		b.NoFaultPerS = rate[(len(rate)-1)/2] // of an even count, the lower middle
		if len(p50) == 0 {
			b.Any["no_fault"] = "no sample"
		}
	}
	if len(hand) == 0 {
		b.Any["handoff_p50_ms"] = "no valid no-fault case with a hand-off"
	} else {
		b.NoFaultHandoffNs = upperMedian(hand)
	}
}

// upperMedian: the middle value, of an even count the higher middle one
// (for a latency, the worse).
func upperMedian(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// EnvelopeLine is one swept case of one backend: its rows as points
// (MODEL §17).
type EnvelopeLine struct {
	Case    string          `json:"case"`
	Backend string          `json:"backend"`
	Axis    string          `json:"axis"`
	Points  []EnvelopePoint `json:"points"`
}

type EnvelopePoint struct {
	X     float64           `json:"x"`
	Value string            `json:"value"`
	Rate  Rate              `json:"two_holders"`
	Any   map[string]string `json:"any,omitempty"`
}

func envelope(rows []*RowTruth) []*EnvelopeLine {
	var out []*EnvelopeLine
	for _, r := range rows {
		if r.Sweep == nil || len(r.Sweep.X) == 0 {
			continue
		}
		var line *EnvelopeLine
		for _, l := range out {
			if l.Case == r.Sweep.Case && l.Backend == r.Backend {
				line = l
			}
		}
		if line == nil {
			line = &EnvelopeLine{Case: r.Sweep.Case, Backend: r.Backend, Axis: r.Sweep.Labels[0]}
			out = append(out, line)
		}
		p := EnvelopePoint{X: r.Sweep.X[0], Value: r.Sweep.Values[0], Rate: r.TwoHolders}
		if w, ok := r.Any["evidence"]; ok {
			p.Any = map[string]string{"two_holders": w}
		}
		line.Points = append(line.Points, p)
	}
	for _, l := range out {
		sort.Slice(l.Points, func(i, j int) bool { return l.Points[i].X < l.Points[j].X })
	}
	return out
}

// JSON is the truth, indented.
func (t *Truth) JSON() []byte {
	b, _ := json.MarshalIndent(t, "", "  ")
	return b
}
