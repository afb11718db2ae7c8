package sim_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/sim"
	"github.com/lockbench/lockbench/verdict"
)

var (
	flagSeeds  = flag.Int("sim.seeds", 0, "how many seeds TestAgainstChecker runs (default 300, or $SIM_SEEDS)")
	flagOut    = flag.String("sim.out", "", "write every history, its truth and the checker's summary to this directory")
	flagFields = flag.String("sim.fields", "", "compare only these fields (comma-separated prefixes; or $SIM_FIELDS)")
)

func seeds() (from, to uint64) {
	if s := os.Getenv("SIM_SEED"); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		return n, n
	}
	n := 300
	if testing.Short() {
		n = 40 // make test's -race pass; the pass without -race runs 300
	}
	if s := os.Getenv("SIM_SEEDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if *flagSeeds > 0 {
		n = *flagSeeds
	}
	return 1, uint64(n)
}

// fieldFilter: SIM_FIELDS=check.zombies,metrics.handoff keeps only the
// mismatches of fields starting with one of these.
func fieldFilter() []string {
	s := *flagFields
	if s == "" {
		s = os.Getenv("SIM_FIELDS")
	}
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// --- the checker's summary, decoded into this package's own types --------
//
// Pointers are fields that may be absent: a figure with no value (MODEL
// §15), or a field the checker does not write yet.

type gotPct struct {
	Count *int64   `json:"count"`
	Mean  *float64 `json:"mean_ms"`
	Min   *float64 `json:"min_ms"`
	P50   *float64 `json:"p50_ms"`
	P90   *float64 `json:"p90_ms"`
	P99   *float64 `json:"p99_ms"`
	P999  *float64 `json:"p999_ms"`
	Max   *float64 `json:"max_ms"`
}

type gotPhaseStats struct {
	DurationS       float64  `json:"duration_s"`
	Acquisitions    int      `json:"acquisitions"`
	AcquiresPerSec  float64  `json:"acquisitions_per_s"`
	AcquiresFailed  int      `json:"acquires_failed"`
	AcquiresUnknown int      `json:"acquires_unknown"`
	AcquiresUnsent  int      `json:"acquires_unsent"`
	P50             *float64 `json:"p50_ms"`
	P99             *float64 `json:"p99_ms"`
	Max             *float64 `json:"max_ms"`
	Violations      int      `json:"violations"`
}

type gotFault struct {
	Fault              string   `json:"fault"`
	Verdict            string   `json:"verdict"`
	JudgedWith         string   `json:"judged_with"`
	AcquisitionsDuring *int     `json:"acquisitions_during"`
	AcquisitionsAfter  *int     `json:"acquisitions_after"`
	RecoveredAfterMs   *float64 `json:"recovered_after_ms"`
	ClearMs            *float64 `json:"clear_ms"`
	NextGrantMs        *float64 `json:"next_grant_ms"`
}

type gotCase struct {
	Check struct {
		Case            string   `json:"case"`
		Status          string   `json:"status"`
		Valid           bool     `json:"valid"`
		InvalidReasons  []string `json:"invalid_reasons"`
		Unmet           []string `json:"unmet_expectations"`
		MutualExclusion string   `json:"mutual_exclusion"`
		Violations      int      `json:"violations"`
		Unproven        *struct {
			Violations int `json:"violations"`
		} `json:"unproven"`
		OverlapMaxMs     *float64 `json:"overlap_max_ms"`
		OverlapP50Ms     *float64 `json:"overlap_p50_ms"`
		FirstViolationMs *float64 `json:"first_violation_ms"`
		Zombies          *int     `json:"zombies"`
		ZombieMaxMs      *float64 `json:"zombie_max_ms"`
		ZombieP50Ms      *float64 `json:"zombie_p50_ms"`
		AcquiresOK       int      `json:"acquires_ok"`
		AcquiresFailed   int      `json:"acquires_failed"`
		AcquiresUnknown  int      `json:"acquires_unknown"`
		AcquiresUnsent   int      `json:"acquires_unsent"`
		DuplicateGrants  int      `json:"duplicate_grants"`
		ReleasesNotHeld  int      `json:"releases_not_held"`
		LeasesLost       int      `json:"leases_lost"`
		WrongToken       int      `json:"wrong_token_releases_accepted"`
		TokenRegr        int      `json:"token_regressions"`
		sim.LateTruth
		Exposures *int  `json:"exposures"`
		Decided   *bool `json:"decided"`
		Resource  struct {
			Verdict            string `json:"verdict"`
			LostUpdates        int    `json:"lost_updates"`
			StaleRejected      int    `json:"stale_rejected"`
			StaleReadsRejected int    `json:"stale_reads_rejected"`
			StaleAccepted      int    `json:"stale_accepted"`
			TokenReuse         int    `json:"token_reuse"`
		} `json:"resource"`
		Liveness struct {
			Verdict      string     `json:"verdict"`
			LongestGapMs float64    `json:"longest_gap_ms"`
			Faults       []gotFault `json:"faults"`
		} `json:"liveness"`
	} `json:"check"`
	Metrics struct {
		AcquireLatency gotPct  `json:"acquire_latency"`
		Handoff        gotPct  `json:"handoff_latency"`
		HandoffBarges  *int    `json:"handoff_barges"`
		HoldTime       gotPct  `json:"hold_time"`
		AcquiresPerSec float64 `json:"acquisitions_per_s"`
		DuringFaults   *int    `json:"acquisitions_during_faults"`
		AfterFaults    *int    `json:"acquisitions_after_faults"`
		Phases         []struct {
			Fault  string        `json:"fault"`
			Before gotPhaseStats `json:"before"`
			During gotPhaseStats `json:"during"`
			After  gotPhaseStats `json:"after"`
		} `json:"phases"`
	} `json:"metrics"`
	Linearizability struct {
		Verdict       string `json:"verdict"`
		FencedVerdict string `json:"fenced_verdict"`
	} `json:"linearizability"`
	Thresholds []struct {
		Source   string  `json:"threshold"`
		Observed float64 `json:"observed"`
		Pass     bool    `json:"pass"`
		// NoValue: why the figure has no value; absent when it has one
		NoValue string `json:"no_value"`
	} `json:"thresholds"`
}

type gotRate struct {
	Hits int     `json:"hits"`
	Of   int     `json:"of"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

type gotRow struct {
	Row          string  `json:"row"`
	Verdict      string  `json:"verdict"`
	Met          int     `json:"met"`
	Trials       int     `json:"trials"`
	Need         int     `json:"need"`
	Invalid      int     `json:"invalid"`
	Missing      int     `json:"missing"`
	Decided      *int    `json:"decided"`
	Exposures    int     `json:"exposures"`
	TwoHolders   gotRate `json:"two_holders"`
	OverlapMaxMs float64 `json:"overlap_max_ms"`
	ZombieMaxMs  float64 `json:"zombie_max_ms"`
}

type got struct {
	Cases []gotCase `json:"cases"`
	Rows  []gotRow  `json:"rows"`
}

type gotCell struct {
	Outcome            string  `json:"outcome"`
	Cases              int     `json:"cases"`
	Invalid            int     `json:"invalid"`
	Trials             int     `json:"trials"`
	Exposures          int     `json:"exposures"`
	TwoHolders         gotRate `json:"two_holders"`
	Damage             gotRate `json:"damage"`
	Violations         int     `json:"violations"`
	StaleRejected      int     `json:"stale_rejected"`
	StaleAccepted      int     `json:"stale_accepted"`
	LostUpdates        int     `json:"lost_updates"`
	TokenRegressions   int     `json:"token_regressions"`
	AcquisitionsDuring int     `json:"acquisitions_during"`
	AcquisitionsAfter  int     `json:"acquisitions_after"`
	LongestGapMs       float64 `json:"longest_gap_ms"`
	RecoveredAfterMs   float64 `json:"recovered_after_ms"`
	NotLive            int     `json:"not_live"`
	OverlapMaxMs       float64 `json:"overlap_max_ms"`
	ZombieMaxMs        float64 `json:"zombie_max_ms"`
	TooFew             *bool   `json:"too_few"`
}

type gotDecision struct {
	Rows []struct {
		Backend        string              `json:"backend"`
		P50Ms          float64             `json:"no_fault_p50_ms"`
		P99Ms          float64             `json:"no_fault_p99_ms"`
		AcquiresPerSec float64             `json:"no_fault_acquisitions_per_s"`
		HandoffP50Ms   float64             `json:"handoff_p50_ms"`
		NoFaultCases   int                 `json:"no_fault_cases"`
		Cells          map[string]*gotCell `json:"cells"`
	} `json:"rows"`
}

type gotEnvelope []struct {
	Case    string `json:"case"`
	Backend string `json:"backend"`
	Axis    string `json:"axis"`
	Points  []struct {
		X     float64 `json:"x"`
		Value string  `json:"value"`
		Rate  gotRate `json:"two_holders"`
	} `json:"points"`
}

// mismatch is one field where the checker and the truth differ.
type mismatch struct {
	seed      uint64
	where     string // case 2 "c2" / row "r" / run
	field     string
	want, got string
	tags      string
	dir       string
}

func (m mismatch) String() string {
	return fmt.Sprintf("seed %d %s: %s: truth %s, checker %s [%s]", m.seed, m.where, m.field, m.want, m.got, m.tags)
}

// result is one seed's comparison.
type result struct {
	ms      []mismatch
	absent  map[string]int // new fields the checker did not write
	truth   *sim.Truth
	summary []byte
	elapsed time.Duration
}

// cmpOpts: linBudget > 0 accepts "unknown" linearizability when the check
// took at least that long (FuzzSimulate's smaller search budget).
type cmpOpts struct {
	linBudget time.Duration
}

// comparer collects mismatches for one seed.
type comparer struct {
	seed   uint64
	tags   string
	found  []mismatch
	absent map[string]int
	keep   []string
}

func (c *comparer) add(where, field, want, gotv string) {
	if len(c.keep) > 0 {
		ok := false
		for _, k := range c.keep {
			if strings.HasPrefix(field, k) {
				ok = true
			}
		}
		if !ok {
			return
		}
	}
	c.found = append(c.found, mismatch{seed: c.seed, where: where, field: field, want: want, got: gotv, tags: c.tags})
}

func (c *comparer) eq(where, field string, want, gotv any) {
	if fmt.Sprint(want) != fmt.Sprint(gotv) {
		c.add(where, field, fmt.Sprint(want), fmt.Sprint(gotv))
	}
}

func fms(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }

// ms compares an exact duration (ns in the truth, ms in the summary).
func (c *comparer) ms(where, field string, wantNs int64, gotMs float64) {
	if math.Abs(float64(wantNs)/1e6-gotMs) > 1e-6 {
		c.add(where, field, fms(float64(wantNs)/1e6), fms(gotMs))
	}
}

// hdr compares a percentile the checker reads from an HDR histogram of µs
// with 3 significant digits: within 0.1% above the exact value, 1 µs
// either way.
func (c *comparer) hdr(where, field string, wantNs int64, gotMs float64) {
	w := float64(wantNs) / 1e6
	if gotMs < w-0.001-1e-9 || gotMs > w*1.001+0.001+1e-9 {
		c.add(where, field, fms(w)+" (±HDR)", fms(gotMs))
	}
}

// mean compares the mean within the histogram's precision.
func (c *comparer) mean(where, field string, wantNs float64, gotMs float64) {
	w := wantNs / 1e6
	if math.Abs(gotMs-w) > w*0.001+0.001+1e-9 {
		c.add(where, field, fms(w)+" (±HDR)", fms(gotMs))
	}
}

// present counts a new field the checker does not write yet.
func (c *comparer) present(field string, p bool) bool {
	if !p {
		c.absent[field]++
	}
	return p
}

func (c *comparer) rate(where, field string, want sim.Rate, g gotRate) {
	c.eq(where, field+".hits", want.Hits, g.Hits)
	c.eq(where, field+".of", want.Of, g.Of)
	if want.Of == 0 {
		return // no decided trial: the rate has no value (MODEL §17), nor an interval
	}
	if math.Abs(want.Low-g.Low) > 1e-6 {
		c.add(where, field+".low", fmt.Sprint(want.Low), fmt.Sprint(g.Low))
	}
	if math.Abs(want.High-g.High) > 1e-6 {
		c.add(where, field+".high", fmt.Sprint(want.High), fmt.Sprint(g.High))
	}
}

// latency compares one latency (MODEL §15): with no sample, every figure
// but the count is absent.
func (c *comparer) latency(where, field string, want sim.Latency, g gotPct) {
	n := int64(0)
	if g.Count != nil {
		n = *g.Count
	}
	c.eq(where, field+".count", want.Count, n)
	figs := []struct {
		name string
		p    *float64
	}{{"mean_ms", g.Mean}, {"min_ms", g.Min}, {"p50_ms", g.P50}, {"p90_ms", g.P90}, {"p99_ms", g.P99}, {"p999_ms", g.P999}, {"max_ms", g.Max}}
	if want.Count == 0 {
		for _, f := range figs {
			if f.p != nil {
				c.add(where, field+"."+f.name, "absent (no sample)", fms(*f.p))
			}
		}
		return
	}
	for _, f := range figs {
		if f.p == nil {
			c.add(where, field+"."+f.name, "a value", "absent")
		}
	}
	if int64(want.Count) != n || want.Any != "" {
		return // the figures of different samples, or not compared
	}
	if g.Min != nil {
		c.ms(where, field+".min_ms", want.MinNs, *g.Min)
	}
	if g.Max != nil {
		c.ms(where, field+".max_ms", want.MaxNs, *g.Max)
	}
	if g.Mean != nil {
		c.mean(where, field+".mean_ms", want.MeanNs, *g.Mean)
	}
	for _, p := range []struct {
		name string
		w    int64
		g    *float64
	}{{"p50_ms", want.P50Ns, g.P50}, {"p90_ms", want.P90Ns, g.P90}, {"p99_ms", want.P99Ns, g.P99}, {"p999_ms", want.P999Ns, g.P999}} {
		if p.g != nil {
			c.hdr(where, field+"."+p.name, p.w, *p.g)
		}
	}
}

func (c *comparer) phase(where, field string, want sim.PhaseStats, g gotPhaseStats) {
	skip := func(f string) bool { _, ok := want.Any[f]; return ok }
	if !skip("duration_s") && math.Abs(float64(want.DurationNs)/1e9-g.DurationS) > 1e-9 {
		c.add(where, field+".duration_s", strconv.FormatFloat(float64(want.DurationNs)/1e9, 'f', 9, 64), strconv.FormatFloat(g.DurationS, 'f', 9, 64))
	}
	c.eq(where, field+".acquisitions", want.Acquisitions, g.Acquisitions)
	if !skip("acquisitions_per_s") && want.DurationNs > 0 && math.Abs(want.PerS-g.AcquiresPerSec) > 1e-6*max(1, want.PerS) {
		c.add(where, field+".acquisitions_per_s", fmt.Sprint(want.PerS), fmt.Sprint(g.AcquiresPerSec))
	}
	c.eq(where, field+".acquires_failed", want.Failed, g.AcquiresFailed)
	c.eq(where, field+".acquires_unsent", want.Unsent, g.AcquiresUnsent)
	if !skip("acquires_unknown") {
		c.eq(where, field+".acquires_unknown", want.Unknown, g.AcquiresUnknown)
	}
	c.eq(where, field+".violations", want.Violations, g.Violations)
	l := want.Latency
	for _, p := range []struct {
		name string
		w    int64
		g    *float64
		hdr  bool
	}{{"p50_ms", l.P50Ns, g.P50, true}, {"p99_ms", l.P99Ns, g.P99, true}, {"max_ms", l.MaxNs, g.Max, false}} {
		switch {
		case l.Count == 0 && p.g != nil:
			c.add(where, field+"."+p.name, "absent (no acquisition)", fms(*p.g))
		case l.Count == 0:
		case p.g == nil:
			c.add(where, field+"."+p.name, "a value", "absent")
		case want.Acquisitions != g.Acquisitions || want.Failed != g.AcquiresFailed || want.Unsent != g.AcquiresUnsent || (want.Unknown != g.AcquiresUnknown && want.Any["acquires_unknown"] == "") || l.Any != "":
			// the figures of different samples
		case p.hdr:
			c.hdr(where, field+"."+p.name, p.w, *p.g)
		default:
			c.ms(where, field+"."+p.name, p.w, *p.g)
		}
	}
}

// analyze runs the checker on one seed's files.
func analyze(hist, tail []byte) (*verdict.Summary, error) {
	if tail == nil {
		return verdict.Analyze(history.NewReader(bytes.NewReader(hist), "history.jsonl"))
	}
	dir, err := os.MkdirTemp("", "simj")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "history.jsonl"), hist, 0o644)
	os.WriteFile(filepath.Join(dir, "history.tail.jsonl"), tail, 0o644)
	return verdict.AnalyzeFile(filepath.Join(dir, "history.jsonl"))
}

// compare runs the checker on one seed's history and compares every field
// of the truth.
func compare(seed uint64, opt cmpOpts) (res result) {
	r := sim.Simulate(seed)
	hist, tail := r.Files()
	truth := r.Truth(true)
	t0 := time.Now()
	s, err := analyze(hist, tail)
	res = result{truth: truth, elapsed: time.Since(t0)}
	c := &comparer{seed: seed, absent: map[string]int{}, keep: fieldFilter()}
	defer func() { res.ms, res.absent = c.found, c.absent }()
	if truth.Refused {
		if err == nil {
			c.add("run", "refused", fmt.Sprintf("error at line %d (%s)", truth.RefusedLine, truth.RefusedWhat), "accepted")
		} else if !mentionsLine(err.Error(), truth.RefusedLine) {
			c.add("run", "refused.line", fmt.Sprint(truth.RefusedLine), err.Error())
		}
		return res
	}
	if err != nil {
		c.add("run", "refused", "accepted", err.Error())
		return res
	}
	summary, _ := json.MarshalIndent(s, "", " ")
	res.summary = summary
	var g got
	if err := json.Unmarshal(summary, &g); err != nil {
		c.add("run", "summary", "decodes", err.Error())
		return res
	}
	code := int(s.ExitCode())
	if truth.ExitCodeAny == "" && code != truth.ExitCode {
		c.add("run", "exit_code", fmt.Sprint(truth.ExitCode), fmt.Sprint(code))
	}
	// §14 maps the rows (and thresholds) to the exit code: the checker's
	// own rows must give its own exit code.
	if own := ownExitCode(&g); own != code {
		c.add("run", "exit_code (from the checker's own rows, §14)", fmt.Sprint(own), fmt.Sprint(code))
	}
	if len(g.Cases) != len(truth.Cases) {
		c.add("run", "cases", fmt.Sprint(len(truth.Cases)), fmt.Sprint(len(g.Cases)))
	}
	for i, tc := range truth.Cases {
		if i >= len(g.Cases) {
			break
		}
		if tc.Skip != "" {
			continue
		}
		c.tags = tc.Tags
		if truth.Journal {
			c.tags += " journal"
		}
		compareCase(c, tc, &g.Cases[i], i, opt, res.elapsed)
	}
	c.tags = truth.Describe
	compareRows(c, truth, g.Rows)
	compareDecision(c, truth, verdict.NewDecision(s))
	compareEnvelope(c, truth, verdict.Envelope(s))
	return res
}

func compareCase(c *comparer, tc *sim.CaseTruth, gc *gotCase, i int, opt cmpOpts, elapsed time.Duration) {
	where := fmt.Sprintf("case %d %q", i+1, tc.Name)
	skip := func(field string) bool { _, ok := tc.Any[field]; return ok }
	cmp := func(field string, want, gotv any) {
		if skip(field) {
			return
		}
		if ws, ok := want.(string); ok && ws == sim.Any {
			return
		}
		if alt, ok := tc.Alt[field]; ok && alt == fmt.Sprint(gotv) {
			return
		}
		c.eq(where, field, want, gotv)
	}
	k := gc.Check
	if tc.Status != k.Status {
		c.add(where, "check.status", fmt.Sprintf("%s %q %q", tc.Status, tc.InvalidReasons, tc.Unmet), fmt.Sprintf("%s %q %q", k.Status, k.InvalidReasons, k.Unmet))
	}
	cmp("check.valid", tc.Valid, k.Valid)
	cmp("check.mutual_exclusion", tc.MutualExclusion, k.MutualExclusion)
	cmp("check.violations", tc.Violations, k.Violations)
	// §12: what a record that lost worker lines shows, unproven
	if tc.EventsLost != (k.Unproven != nil) {
		c.add(where, "check.unproven", fmt.Sprint(tc.EventsLost), fmt.Sprint(k.Unproven != nil))
	} else if k.Unproven != nil {
		cmp("check.unproven.violations", tc.UnprovenViolations, k.Unproven.Violations)
	}
	cmp("check.acquires_ok", tc.AcquiresOK, k.AcquiresOK)
	cmp("check.acquires_failed", tc.AcquiresFailed, k.AcquiresFailed)
	cmp("check.acquires_unknown", tc.AcquiresUnknown, k.AcquiresUnknown)
	cmp("check.acquires_unsent", tc.AcquiresUnsent, k.AcquiresUnsent)
	cmp("check.duplicate_grants", tc.DuplicateGrants, k.DuplicateGrants)
	cmp("check.releases_not_held", tc.ReleasesNotHeld, k.ReleasesNotHeld)
	cmp("check.leases_lost", tc.LeasesLost, k.LeasesLost)
	cmp("check.wrong_token_releases_accepted", tc.WrongTokenReleasesAccepted, k.WrongToken)
	cmp("check.token_regressions", tc.TokenRegressions, k.TokenRegr)
	cmp("check.late", tc.Late, k.LateTruth)
	cmp("check.resource.verdict", tc.Resource.Verdict, k.Resource.Verdict)
	cmp("check.resource.lost_updates", tc.Resource.LostUpdates, k.Resource.LostUpdates)
	cmp("check.resource.stale_rejected", tc.Resource.StaleRejected, k.Resource.StaleRejected)
	cmp("check.resource.stale_reads_rejected", tc.Resource.StaleReadsRejected, k.Resource.StaleReadsRejected)
	cmp("check.resource.stale_accepted", tc.Resource.StaleAccepted, k.Resource.StaleAccepted)
	cmp("check.resource.token_reuse", tc.Resource.TokenReuse, k.Resource.TokenReuse)
	cmp("check.liveness.verdict", tc.Liveness, k.Liveness.Verdict)
	if !skip("liveness.longest_gap_ms") && tc.LongestGapNs >= 0 {
		c.ms(where, "check.liveness.longest_gap_ms", tc.LongestGapNs, k.Liveness.LongestGapMs)
	}
	// §6 durations and zombies
	durs := []struct {
		field, any string
		want       int64
		g          *float64
	}{{"check.overlap_max_ms", "overlap_max_ms", tc.OverlapMaxNs, k.OverlapMaxMs}, {"check.overlap_p50_ms", "overlap_p50_ms", tc.OverlapP50Ns, k.OverlapP50Ms},
		{"check.zombie_max_ms", "zombie_max_ms", tc.ZombieMaxNs, k.ZombieMaxMs}, {"check.zombie_p50_ms", "zombie_p50_ms", tc.ZombieP50Ns, k.ZombieP50Ms}}
	for _, d := range durs {
		if skip(d.any) || !c.present(d.field, d.g != nil) {
			continue
		}
		c.ms(where, d.field, d.want, *d.g)
	}
	if k.FirstViolationMs != nil {
		if tc.FirstViolationNs < 0 {
			c.eq(where, "check.first_violation_ms", -1, *k.FirstViolationMs)
		} else {
			c.ms(where, "check.first_violation_ms", tc.FirstViolationNs, *k.FirstViolationMs)
		}
	}
	if !skip("zombies") && c.present("check.zombies", k.Zombies != nil) {
		c.eq(where, "check.zombies", tc.Zombies, *k.Zombies)
	}
	// §16, §17
	if !skip("exposures") && c.present("check.exposures", k.Exposures != nil) {
		c.eq(where, "check.exposures", tc.Exposures, *k.Exposures)
	}
	if c.present("check.decided", k.Decided != nil) {
		c.eq(where, "check.decided", tc.Decided, *k.Decided)
	}
	// §11, §15 around each fault
	for _, f := range tc.Faults {
		var gf *gotFault
		for j := range k.Liveness.Faults {
			if k.Liveness.Faults[j].Fault == f.Fault {
				gf = &k.Liveness.Faults[j]
			}
		}
		fw := where + " fault " + f.Fault
		if f.Verdict != sim.Any {
			gv := "(absent)"
			if gf != nil {
				gv = gf.Verdict
			}
			if gv != f.Verdict && !(f.Verdict == "" && gv == "(absent)") {
				c.add(fw, "check.liveness.faults[].verdict", fmt.Sprintf("%q", f.Verdict), fmt.Sprintf("%q", gv))
			}
		}
		if !f.Started {
			continue
		}
		if gf == nil {
			c.add(fw, "check.liveness.faults[]", "present", "absent")
			continue
		}
		fskip := func(field string) bool { _, ok := f.Any[field]; return ok }
		if f.JudgedAt != "" && f.Verdict != sim.Any {
			want := f.JudgedAt
			if want == f.Fault {
				want = "" // judged at its own heal
			}
			c.eq(fw, "check.liveness.faults[].judged_with", fmt.Sprintf("%q", want), fmt.Sprintf("%q", gf.JudgedWith))
		}
		if !fskip("acquisitions_during") && gf.AcquisitionsDuring != nil {
			c.eq(fw, "check.liveness.faults[].acquisitions_during", f.AcqDuring, *gf.AcquisitionsDuring)
		}
		if !fskip("acquisitions_after") && gf.AcquisitionsAfter != nil {
			c.eq(fw, "check.liveness.faults[].acquisitions_after", f.AcqAfter, *gf.AcquisitionsAfter)
		}
		if !fskip("next_grant_ms") && gf.NextGrantMs != nil {
			if f.NextGrantNs < 0 {
				c.eq(fw, "check.liveness.faults[].next_grant_ms", -1, *gf.NextGrantMs)
			} else {
				c.ms(fw, "check.liveness.faults[].next_grant_ms", f.NextGrantNs, *gf.NextGrantMs)
			}
		}
		if !fskip("clear_ms") && gf.ClearMs != nil {
			if f.ClearNs < 0 {
				c.eq(fw, "check.liveness.faults[].clear_ms", -1, *gf.ClearMs)
			} else {
				c.ms(fw, "check.liveness.faults[].clear_ms", f.ClearNs, *gf.ClearMs)
			}
		}
		if !fskip("recovered_after_ms") && gf.RecoveredAfterMs != nil {
			if f.RecoveredNs < 0 {
				c.eq(fw, "check.liveness.faults[].recovered_after_ms", -1, *gf.RecoveredAfterMs)
			} else {
				c.ms(fw, "check.liveness.faults[].recovered_after_ms", f.RecoveredNs, *gf.RecoveredAfterMs)
			}
		}
	}
	// §15 latencies, throughput, phases
	m := gc.Metrics
	c.latency(where, "metrics.acquire_latency", tc.AcquireLatency, m.AcquireLatency)
	if !skip("metrics.handoff_latency") {
		c.latency(where, "metrics.handoff_latency", tc.Handoff, m.Handoff)
		if m.HandoffBarges == nil {
			c.add(where, "metrics.handoff_barges", fmt.Sprint(tc.HandoffBarges), "absent")
		} else {
			cmp("metrics.handoff_barges", tc.HandoffBarges, *m.HandoffBarges)
		}
	}
	c.latency(where, "metrics.hold_time", tc.HoldTime, m.HoldTime)
	if !tc.CutShort && math.Abs(tc.Throughput-m.AcquiresPerSec) > 1e-6*max(1, tc.Throughput) {
		c.add(where, "metrics.acquisitions_per_s", fmt.Sprint(tc.Throughput), fmt.Sprint(m.AcquiresPerSec))
	}
	if m.DuringFaults != nil {
		cmp("metrics.acquisitions_during_faults", tc.AcqDuringFaults, *m.DuringFaults)
	}
	if m.AfterFaults != nil {
		cmp("metrics.acquisitions_after_faults", tc.AcqAfterFaults, *m.AfterFaults)
	}
	for _, p := range tc.Phases {
		found := false
		for _, gp := range m.Phases {
			if gp.Fault != p.Fault {
				continue
			}
			found = true
			pw := where + " phase " + p.Fault
			c.phase(pw, "metrics.phases[].before", p.Before, gp.Before)
			c.phase(pw, "metrics.phases[].during", p.During, gp.During)
			c.phase(pw, "metrics.phases[].after", p.After, gp.After)
		}
		if !found {
			c.add(where+" phase "+p.Fault, "metrics.phases[]", "present", "absent")
		}
	}
	// §19 thresholds
	for _, th := range tc.Thresholds {
		if th.Any != "" {
			continue
		}
		found := false
		for _, gt := range gc.Thresholds {
			if gt.Source != th.Source {
				continue
			}
			found = true
			if th.PassAny == "" && gt.Pass != th.Pass {
				c.add(where, "thresholds[].pass", fmt.Sprintf("%s: %v (no value %v)", th.Source, th.Pass, th.NoValue), fmt.Sprint(gt.Pass))
			}
			if noValue := gt.NoValue != ""; noValue != th.NoValue {
				c.add(where, "thresholds[].no_value", fmt.Sprintf("%s: %v", th.Source, th.NoValue), fmt.Sprintf("%v (%s)", noValue, gt.NoValue))
			}
			if th.NoValue {
				continue
			}
			if th.HDR {
				lo, hi := th.Observed-0.001-1e-9, th.Observed*1.001+0.001+1e-9
				if gt.Observed < lo || gt.Observed > hi {
					c.add(where, "thresholds[].observed", fmt.Sprintf("%s: %v (±HDR)", th.Source, th.Observed), fmt.Sprint(gt.Observed))
				}
			} else if math.Abs(gt.Observed-th.Observed) > 1e-6*max(1, math.Abs(th.Observed)) {
				c.add(where, "thresholds[].observed", fmt.Sprintf("%s: %v", th.Source, th.Observed), fmt.Sprint(gt.Observed))
			}
		}
		if !found {
			c.add(where, "thresholds[]", th.Source, "(absent)")
		}
	}
	// §8
	lin := func(field, want, gotv string) {
		if opt.linBudget > 0 && elapsed >= opt.linBudget && gotv == "unknown" {
			return // the fuzz target's smaller search budget ran out
		}
		cmp(field, want, gotv)
	}
	lin("linearizability.verdict", tc.Lin, gc.Linearizability.Verdict)
	lin("linearizability.fenced_verdict", tc.LinFenced, gc.Linearizability.FencedVerdict)
}

func compareRows(c *comparer, truth *sim.Truth, rows []gotRow) {
	for _, tr := range truth.Rows {
		var gr *gotRow
		for i := range rows {
			if rows[i].Row == tr.Row {
				gr = &rows[i]
			}
		}
		where := fmt.Sprintf("row %q", tr.Row)
		if gr == nil {
			c.add(where, "rows[]", "present", "absent")
			continue
		}
		cmp := func(field string, want, gotv any) {
			if _, skip := tr.Any[strings.TrimPrefix(field, "rows.")]; skip {
				return
			}
			c.eq(where, field, want, gotv)
		}
		cmp("rows.verdict", tr.Verdict, gr.Verdict)
		cmp("rows.met", tr.Met, gr.Met)
		cmp("rows.trials", tr.Trials, gr.Trials)
		cmp("rows.need", tr.Need, gr.Need)
		cmp("rows.invalid", tr.Invalid, gr.Invalid)
		cmp("rows.missing", tr.Missing, gr.Missing)
		if _, skip := tr.Any["evidence"]; skip {
			continue
		}
		if c.present("rows.decided", gr.Decided != nil) {
			cmp("rows.decided", tr.Decided, *gr.Decided)
		}
		cmp("rows.exposures", tr.Exposures, gr.Exposures)
		c.rate(where, "rows.two_holders", tr.TwoHolders, gr.TwoHolders)
		if _, skip := tr.Any["overlap_max_ms"]; !skip {
			c.ms(where, "rows.overlap_max_ms", tr.OverlapMaxNs, gr.OverlapMaxMs)
		}
		if _, skip := tr.Any["zombie_max_ms"]; !skip {
			c.ms(where, "rows.zombie_max_ms", tr.ZombieMaxNs, gr.ZombieMaxMs)
		}
	}
	if len(rows) != len(truth.Rows) {
		c.add("run", "rows", fmt.Sprint(len(truth.Rows)), fmt.Sprint(len(rows)))
	}
}

func compareDecision(c *comparer, truth *sim.Truth, d *verdict.Decision) {
	var gd gotDecision
	b, _ := json.Marshal(d)
	json.Unmarshal(b, &gd)
	for _, tb := range truth.Decision {
		where := fmt.Sprintf("decision %q", tb.Backend)
		var gb *struct {
			Backend        string              `json:"backend"`
			P50Ms          float64             `json:"no_fault_p50_ms"`
			P99Ms          float64             `json:"no_fault_p99_ms"`
			AcquiresPerSec float64             `json:"no_fault_acquisitions_per_s"`
			HandoffP50Ms   float64             `json:"handoff_p50_ms"`
			NoFaultCases   int                 `json:"no_fault_cases"`
			Cells          map[string]*gotCell `json:"cells"`
		}
		for i := range gd.Rows {
			if gd.Rows[i].Backend == tb.Backend {
				gb = &gd.Rows[i]
			}
		}
		if gb == nil {
			c.add(where, "decision.rows[]", "present", "absent")
			continue
		}
		if _, skip := tb.Any["no_fault"]; !skip {
			c.hdr(where, "decision.no_fault_p50_ms", tb.NoFaultP50Ns, gb.P50Ms)
			c.hdr(where, "decision.no_fault_p99_ms", tb.NoFaultP99Ns, gb.P99Ms)
			if math.Abs(tb.NoFaultPerS-gb.AcquiresPerSec) > 1e-6*max(1, tb.NoFaultPerS) {
				c.add(where, "decision.no_fault_acquisitions_per_s", fmt.Sprint(tb.NoFaultPerS), fmt.Sprint(gb.AcquiresPerSec))
			}
		}
		if _, skip := tb.Any["handoff_p50_ms"]; !skip {
			c.hdr(where, "decision.handoff_p50_ms", tb.NoFaultHandoffNs, gb.HandoffP50Ms)
		}
		if tb.NoFaultCases != gb.NoFaultCases {
			c.add(where, "decision.no_fault_cases", fmt.Sprint(tb.NoFaultCases), fmt.Sprint(gb.NoFaultCases))
		}
		for class, tc := range tb.Cells {
			cw := fmt.Sprintf("%s cell %q", where, class)
			gc := gb.Cells[class]
			if gc == nil {
				c.add(cw, "decision.cells[]", "present", "absent")
				continue
			}
			cmp := func(field string, want, gotv any) {
				if _, skip := tc.Any[field]; skip {
					return
				}
				c.eq(cw, "decision.cells."+field, want, gotv)
			}
			cmp("outcome", tc.Outcome, gc.Outcome)
			cmp("cases", tc.Cases, gc.Cases)
			cmp("invalid", tc.Invalid, gc.Invalid)
			cmp("trials", tc.Trials, gc.Trials)
			cmp("exposures", tc.Exposures, gc.Exposures)
			if _, skip := tc.Any["two_holders"]; !skip {
				c.rate(cw, "decision.cells.two_holders", tc.TwoHolders, gc.TwoHolders)
				c.rate(cw, "decision.cells.damage", tc.Damage, gc.Damage)
			}
			cmp("violations", tc.Violations, gc.Violations)
			cmp("stale_rejected", tc.StaleRejected, gc.StaleRejected)
			cmp("stale_accepted", tc.StaleAccepted, gc.StaleAccepted)
			cmp("lost_updates", tc.LostUpdates, gc.LostUpdates)
			cmp("token_regressions", tc.TokenRegressions, gc.TokenRegressions)
			cmp("acquisitions_during", tc.AcqDuring, gc.AcquisitionsDuring)
			cmp("acquisitions_after", tc.AcqAfter, gc.AcquisitionsAfter)
			cmp("not_live", tc.NotLive, gc.NotLive)
			durs := []struct {
				f string
				w int64
				g float64
			}{{"longest_gap_ms", tc.LongestGapNs, gc.LongestGapMs}, {"overlap_max_ms", tc.OverlapMaxNs, gc.OverlapMaxMs}, {"zombie_max_ms", tc.ZombieMaxNs, gc.ZombieMaxMs}}
			for _, d := range durs {
				if _, skip := tc.Any[d.f]; !skip {
					c.ms(cw, "decision.cells."+d.f, d.w, d.g)
				}
			}
			if _, skip := tc.Any["recovered_after_ms"]; !skip {
				if tc.RecoveredNs < 0 {
					c.eq(cw, "decision.cells.recovered_after_ms", -1, gc.RecoveredAfterMs)
				} else {
					c.ms(cw, "decision.cells.recovered_after_ms", tc.RecoveredNs, gc.RecoveredAfterMs)
				}
			}
			if _, skip := tc.Any["too_few"]; !skip && c.present("decision.cells.too_few", gc.TooFew != nil) {
				c.eq(cw, "decision.cells.too_few", tc.TooFew, *gc.TooFew)
			}
		}
		for class := range gb.Cells {
			if tb.Cells[class] == nil {
				c.add(fmt.Sprintf("%s cell %q", where, class), "decision.cells[]", "absent", "present")
			}
		}
	}
	if len(gd.Rows) != len(truth.Decision) {
		c.add("run", "decision.rows", fmt.Sprint(len(truth.Decision)), fmt.Sprint(len(gd.Rows)))
	}
}

func compareEnvelope(c *comparer, truth *sim.Truth, lines []verdict.EnvelopeLine) {
	var ge gotEnvelope
	b, _ := json.Marshal(lines)
	json.Unmarshal(b, &ge)
	for _, tl := range truth.Envelope {
		where := fmt.Sprintf("envelope %q %s", tl.Case, tl.Backend)
		found := false
		for _, gl := range ge {
			if gl.Case != tl.Case || gl.Backend != tl.Backend {
				continue
			}
			found = true
			c.eq(where, "envelope.axis", tl.Axis, gl.Axis)
			for _, tp := range tl.Points {
				pw := fmt.Sprintf("%s x=%g", where, tp.X)
				ok := false
				for _, gp := range gl.Points {
					if gp.X != tp.X {
						continue
					}
					ok = true
					c.eq(pw, "envelope.points.value", tp.Value, gp.Value)
					if _, skip := tp.Any["two_holders"]; !skip {
						c.rate(pw, "envelope.points.two_holders", tp.Rate, gp.Rate)
					}
				}
				if !ok {
					c.add(pw, "envelope.points[]", "present", "absent")
				}
			}
			if len(gl.Points) != len(tl.Points) {
				c.add(where, "envelope.points", fmt.Sprint(len(tl.Points)), fmt.Sprint(len(gl.Points)))
			}
		}
		if !found {
			c.add(where, "envelope[]", "present", "absent")
		}
	}
	if len(ge) != len(truth.Envelope) {
		c.add("run", "envelope", fmt.Sprint(len(truth.Envelope)), fmt.Sprint(len(ge)))
	}
}

func ownExitCode(g *got) int {
	has := func(v string) bool {
		for _, r := range g.Rows {
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
	for _, c := range g.Cases {
		for _, th := range c.Thresholds {
			if !th.Pass {
				return 99
			}
		}
	}
	return 0
}

// mentionsLine: the error names the line (as a whole number in its text).
func mentionsLine(msg string, line int) bool {
	n := strconv.Itoa(line)
	for i := 0; i+len(n) <= len(msg); i++ {
		if msg[i:i+len(n)] != n {
			continue
		}
		before := i == 0 || msg[i-1] < '0' || msg[i-1] > '9'
		after := i+len(n) == len(msg) || msg[i+len(n)] < '0' || msg[i+len(n)] > '9'
		if before && after {
			return true
		}
	}
	return false
}

// save writes a seed's history, journal, truth and summary to dir/seedN
// and returns that directory.
func save(dir string, seed uint64, truth *sim.Truth, summary []byte) string {
	dir = filepath.Join(dir, fmt.Sprintf("seed%d", seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	r := sim.Simulate(seed)
	hist, tail := r.Files()
	os.WriteFile(filepath.Join(dir, "history.jsonl"), hist, 0o644)
	if tail != nil {
		os.WriteFile(filepath.Join(dir, "history.tail.jsonl"), tail, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "truth.json"), truth.JSON(), 0o644)
	if summary != nil {
		os.WriteFile(filepath.Join(dir, "summary.json"), summary, 0o644)
	}
	return dir
}

// mismatchDir is where a test run leaves the seeds that disagree (the
// first maxSaved of them, unless -sim.out keeps everything).
func mismatchDir(t testing.TB) string {
	if *flagOut != "" {
		return *flagOut
	}
	d, err := os.MkdirTemp("", "sim-mismatch-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const maxSaved = 40

// slowCheck: a seed whose check took this long is reported (a
// linearizability search running to its budget is a finding about the
// checker's search).
const slowCheck = 3 * time.Second

// linBudget is the checker's linearizability search budget in
// TestAgainstChecker: 1 s, or $SIM_LIN_BUDGET (MODEL §8's own is 10 s). A
// check that takes longer may answer "unknown", which is then accepted:
// such seeds are listed, a finding about the search.
func linBudget() time.Duration {
	if s := os.Getenv("SIM_LIN_BUDGET"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return time.Second
}

// TestAgainstChecker compares the checker's verdicts and figures with the
// simulator's truth, field by field, for seeds 1..N. Seeds are compared two
// at a time and forgotten as they are tallied: only the mismatches' counts
// and a few examples of each field are kept.
func TestAgainstChecker(t *testing.T) {
	from, to := seeds()
	budget := linBudget()
	verdict.LinTimeout = budget
	agg := newTally(os.Getenv("SIM_VERBOSE") != "")
	var mu sync.Mutex
	statuses := map[string]int{}
	absent := map[string]int{}
	var slow []string
	out := ""
	saved := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	// SIM_SEEDLIST=file: only the seeds it lists (say, those a long run
	// found disagreeing)
	var list []uint64
	if f := os.Getenv("SIM_SEEDLIST"); f != "" {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Fields(string(b)) {
			n, _ := strconv.ParseUint(l, 10, 64)
			list = append(list, n)
		}
	} else {
		for s := from; s <= to; s++ {
			list = append(list, s)
		}
	}
	for _, s := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func(seed uint64) {
			defer wg.Done()
			defer func() { <-sem }()
			r := compare(seed, cmpOpts{linBudget: budget})
			mu.Lock()
			defer mu.Unlock()
			for _, c := range r.truth.Cases {
				statuses[c.Status]++
			}
			for f, n := range r.absent {
				absent[f] += n
			}
			if r.elapsed >= min(slowCheck, budget) {
				slow = append(slow, fmt.Sprintf("seed %d (%.1f s)", seed, r.elapsed.Seconds()))
			}
			if *flagOut != "" {
				save(*flagOut, seed, r.truth, r.summary)
			}
			if len(r.ms) == 0 {
				return
			}
			if out == "" {
				out = mismatchDir(t)
			}
			dir := fmt.Sprintf("(not saved: SIM_SEED=%d go test ./internal/sim -run AgainstChecker)", seed)
			if saved < maxSaved || *flagOut != "" {
				dir = save(out, seed, r.truth, r.summary)
				saved++
			}
			for _, m := range r.ms {
				m.dir = dir
				agg.add(m)
			}
		}(s)
	}
	wg.Wait()
	t.Logf("statuses in the truth over seeds %d..%d: %v", from, to, statuses)
	if len(absent) > 0 {
		var fs []string
		for f, n := range absent {
			fs = append(fs, fmt.Sprintf("%s ×%d", f, n))
		}
		sort.Strings(fs)
		t.Logf("field absent in checker output (not compared): %s", strings.Join(fs, ", "))
	}
	if len(slow) > 0 {
		sort.Slice(slow, func(i, j int) bool {
			return len(slow[i]) < len(slow[j]) || len(slow[i]) == len(slow[j]) && slow[i] < slow[j]
		})
		t.Logf("checks that took %s or more (the linearizability search at its budget of %s: its \"unknown\" is accepted there): %s",
			min(slowCheck, budget), budget, strings.Join(slow, ", "))
	}
	if agg.total == 0 {
		return
	}
	t.Errorf("%d mismatches between the checker and the truth (MODEL.md), by field:\n%s", agg.total, agg.String())
}

// tally groups mismatches by field: how many, in how many seeds (and the
// first of them), and a few examples from different seeds (every one when
// verbose).
type tally struct {
	verbose bool
	total   int
	fields  map[string]*fieldTally
}

type fieldTally struct {
	count    int
	seeds    map[uint64]bool
	examples []mismatch
}

func newTally(verbose bool) *tally { return &tally{verbose: verbose, fields: map[string]*fieldTally{}} }

func (a *tally) add(m mismatch) {
	a.total++
	f := a.fields[m.field]
	if f == nil {
		f = &fieldTally{seeds: map[uint64]bool{}}
		a.fields[m.field] = f
	}
	f.count++
	if !f.seeds[m.seed] && (a.verbose || len(f.examples) < 3) {
		f.examples = append(f.examples, m)
	} else if a.verbose {
		f.examples = append(f.examples, m)
	}
	f.seeds[m.seed] = true
}

func (a *tally) String() string {
	var fields []string
	for f := range a.fields {
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool {
		x, y := a.fields[fields[i]], a.fields[fields[j]]
		if x.count != y.count {
			return x.count > y.count
		}
		return fields[i] < fields[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%7s %6s  %s\n", "count", "seeds", "field")
	for _, name := range fields {
		f := a.fields[name]
		var ss []uint64
		for s := range f.seeds {
			ss = append(ss, s)
		}
		sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
		ex := ""
		for k, s := range ss {
			if k == 6 {
				ex += " ..."
				break
			}
			ex += " " + strconv.FormatUint(s, 10)
		}
		fmt.Fprintf(&b, "%7d %6d  %s   (seeds%s)\n", f.count, len(ss), name, ex)
	}
	b.WriteString("\nexamples (SIM_FIELDS=<field prefix> to see one field, SIM_VERBOSE=1 for all):\n")
	for _, name := range fields {
		fmt.Fprintf(&b, "== %s\n", name)
		ex := append([]mismatch(nil), a.fields[name].examples...)
		sort.SliceStable(ex, func(i, j int) bool { return ex[i].seed < ex[j].seed })
		for _, m := range ex {
			fmt.Fprintf(&b, "   %s\n     history and truth: %s\n", m, m.dir)
		}
	}
	return b.String()
}

// fuzzLinBudget bounds the checker's linearizability search per input in
// FuzzSimulate, so that no input runs long: a verdict "unknown" is then
// accepted from a check that took at least as long.
const fuzzLinBudget = 100 * time.Millisecond

// FuzzSimulate does the comparison for one seed.
func FuzzSimulate(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42} {
		f.Add(s)
	}
	verdict.LinTimeout = fuzzLinBudget
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := compare(seed, cmpOpts{linBudget: fuzzLinBudget})
		if len(r.ms) == 0 {
			return
		}
		dir := save(mismatchDir(t), seed, r.truth, r.summary)
		var b strings.Builder
		for _, m := range r.ms {
			fmt.Fprintf(&b, "  %s\n", m)
		}
		t.Errorf("seed %d: %d mismatches (history and truth in %s):\n%s", seed, len(r.ms), dir, b.String())
	})
}

// TestRepeatedRunAgainstChecker: each seed's history written twice into
// one file (MODEL §14, §18, A5: a run repeated is one run). The truth
// (TruthTwice) counts every trial once in the rows, the cells and the
// envelope, its number repeated; the checker must agree. Seeds whose
// history is cut short or refused are skipped: written twice, they are
// not one history twice.
func TestRepeatedRunAgainstChecker(t *testing.T) {
	from, to := seeds()
	to = min(to, from+49)
	if testing.Short() {
		to = min(to, from+19)
	}
	verdict.LinTimeout = linBudget()
	compared := 0
	for seed := from; seed <= to; seed++ {
		r := sim.Simulate(seed)
		truth, ok := r.TruthTwice()
		if !ok {
			continue
		}
		compared++
		hist, _ := r.Files()
		s, err := analyze(append(append([]byte(nil), hist...), hist...), nil)
		c := &comparer{seed: seed, absent: map[string]int{}, keep: fieldFilter(), tags: truth.Describe}
		if err != nil {
			t.Errorf("seed %d: refused: %v", seed, err)
			continue
		}
		summary, _ := json.Marshal(s)
		var g got
		json.Unmarshal(summary, &g)
		if code := int(s.ExitCode()); truth.ExitCodeAny == "" && code != truth.ExitCode {
			c.add("run", "exit_code", fmt.Sprint(truth.ExitCode), fmt.Sprint(code))
		}
		compareRows(c, truth, g.Rows)
		compareDecision(c, truth, verdict.NewDecision(s))
		compareEnvelope(c, truth, verdict.Envelope(s))
		for _, m := range c.found {
			t.Errorf("history written twice: %s", m)
		}
	}
	t.Logf("%d of seeds %d..%d compared written twice", compared, from, to)
}
