package sim

import (
	"encoding/json"
	"fmt"
)

// Truth is what MODEL.md says of a run's history.
type Truth struct {
	Seed        uint64       `json:"seed"`
	Describe    string       `json:"describe"`
	Journal     bool         `json:"journal"` // the history is read with its tail journal
	Refused     bool         `json:"refused"` // a bad line: the whole history is refused (exit 104)
	RefusedLine int          `json:"refused_line,omitempty"`
	RefusedWhat string       `json:"refused_what,omitempty"`
	ExitCode    int          `json:"exit_code"`
	Cases       []*CaseTruth `json:"cases"`
	Rows        []*RowTruth  `json:"rows"`
}

type RowTruth struct {
	Row     string            `json:"row"`
	Verdict string            `json:"verdict"`
	Met     int               `json:"met"`
	Trials  int               `json:"trials"`
	Need    int               `json:"need"`
	Any     map[string]string `json:"any,omitempty"`
	Detail  string            `json:"detail,omitempty"`
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
	cut := r.visible(withJournal)
	for i, cr := range r.Cases {
		if cr.startIdx >= cut {
			break
		}
		t.Cases = append(t.Cases, cr.truth(r.Events, cut, i))
	}
	t.Rows = rowTruths(t.Cases, r.Cases)
	t.ExitCode = exitCode(t.Rows)
	if t.ExitCode == 0 {
		for _, c := range t.Cases {
			for _, th := range c.Thresholds {
				if th.Any == "" && !th.Pass {
					t.ExitCode = 99 // a threshold failed (MODEL §14)
				}
			}
		}
	}
	return t
}

// rowTruths: MODEL §14.
func rowTruths(cases []*CaseTruth, recs []*caseRec) []*RowTruth {
	type member struct {
		ct   *CaseTruth
		meta *CaseMeta
	}
	var order []string
	rows := map[string][]member{}
	for _, ct := range cases {
		m := &recs[ct.Index].meta
		name := m.Row
		if name == "" {
			name = m.Name
		}
		if rows[name] == nil {
			order = append(order, name)
		}
		rows[name] = append(rows[name], member{ct, m})
	}
	var out []*RowTruth
	for _, name := range order {
		ms := rows[name]
		rt := &RowTruth{Row: name, Any: map[string]string{}}
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
		for _, m := range ms {
			switch m.ct.Status {
			case "ok":
				rt.Met++
			case "violation":
				unsafe++
			case "unavailable":
				notLive++
			case "invalid", "unknown":
				undecided++
			}
		}
		missing := 0
		for tr := 1; tr <= T; tr++ {
			if !seen[tr] {
				missing++
			}
		}
		undecided += missing
		if shape != "" {
			rt.Any["trials"], rt.Any["need"], rt.Any["met"] = shape, shape, shape
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
		rt.Detail = fmt.Sprintf("met %d, unsafe %d, not live %d, undecided %d (missing %d) of %d, need %d %s", rt.Met, unsafe, notLive, undecided, missing, T, N, shape)
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

// JSON is the truth, indented.
func (t *Truth) JSON() []byte {
	b, _ := json.MarshalIndent(t, "", "  ")
	return b
}
