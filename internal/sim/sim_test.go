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

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/sim"
	"github.com/lockbench/lockbench/report"
)

var (
	flagSeeds = flag.Int("sim.seeds", 0, "how many seeds TestAgainstChecker runs (default 300, or $SIM_SEEDS)")
	flagOut   = flag.String("sim.out", "", "write every history, its truth and the checker's summary to this directory")
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

// got is the part of the checker's summary the truth is compared with,
// decoded into this package's own types.
type got struct {
	Cases []struct {
		Check struct {
			Case            string   `json:"case"`
			Status          string   `json:"status"`
			Valid           bool     `json:"valid"`
			InvalidReasons  []string `json:"invalid_reasons"`
			Unmet           []string `json:"unmet_expectations"`
			MutualExclusion string   `json:"mutual_exclusion"`
			Violations      int      `json:"violations"`
			AcquiresOK      int      `json:"acquires_ok"`
			AcquiresFailed  int      `json:"acquires_failed"`
			AcquiresUnknown int      `json:"acquires_unknown"`
			DuplicateGrants int      `json:"duplicate_grants"`
			ReleasesNotHeld int      `json:"releases_not_held"`
			LeasesLost      int      `json:"leases_lost"`
			WrongToken      int      `json:"wrong_token_releases_accepted"`
			TokenRegr       int      `json:"token_regressions"`
			Resource        struct {
				Verdict            string `json:"verdict"`
				LostUpdates        int    `json:"lost_updates"`
				StaleRejected      int    `json:"stale_rejected"`
				StaleReadsRejected int    `json:"stale_reads_rejected"`
				StaleAccepted      int    `json:"stale_accepted"`
				TokenReuse         int    `json:"token_reuse"`
			} `json:"resource"`
			Liveness struct {
				Verdict      string  `json:"verdict"`
				LongestGapMs float64 `json:"longest_gap_ms"`
				Faults       []struct {
					Fault   string `json:"fault"`
					Verdict string `json:"verdict"`
				} `json:"faults"`
			} `json:"liveness"`
		} `json:"check"`
		Linearizability struct {
			Verdict       string `json:"verdict"`
			FencedVerdict string `json:"fenced_verdict"`
		} `json:"linearizability"`
		Thresholds []struct {
			Source   string  `json:"threshold"`
			Observed float64 `json:"observed"`
			Pass     bool    `json:"pass"`
		} `json:"thresholds"`
	} `json:"cases"`
	Rows []struct {
		Row     string `json:"row"`
		Verdict string `json:"verdict"`
		Met     int    `json:"met"`
		Trials  int    `json:"trials"`
		Need    int    `json:"need"`
	} `json:"rows"`
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

// compare runs the checker on one seed's history and compares every field
// of the truth.
func compare(seed uint64) (ms []mismatch, truth *sim.Truth, summary []byte) {
	r := sim.Simulate(seed)
	hist, tail := r.Files()
	truth = r.Truth(true)
	var s *report.Summary
	var err error
	dir := ""
	if tail != nil {
		dir, _ = os.MkdirTemp("", "simj")
		os.WriteFile(filepath.Join(dir, "history.jsonl"), hist, 0o644)
		os.WriteFile(filepath.Join(dir, "history.tail.jsonl"), tail, 0o644)
		s, err = report.AnalyzeFile(filepath.Join(dir, "history.jsonl"))
		os.RemoveAll(dir)
	} else {
		s, err = report.Analyze(history.NewReader(bytes.NewReader(hist), "history.jsonl"))
	}
	tags := ""
	add := func(where, field, want, gotv string) {
		ms = append(ms, mismatch{seed: seed, where: where, field: field, want: want, got: gotv, tags: tags})
	}
	if truth.Refused {
		if err == nil {
			add("run", "refused", fmt.Sprintf("error at line %d (%s)", truth.RefusedLine, truth.RefusedWhat), "accepted")
		} else {
			if !mentionsLine(err.Error(), truth.RefusedLine) {
				add("run", "refused.line", fmt.Sprint(truth.RefusedLine), err.Error())
			}
		}
		return ms, truth, nil
	}
	if err != nil {
		add("run", "refused", "accepted", err.Error())
		return ms, truth, nil
	}
	summary, _ = json.MarshalIndent(s, "", " ")
	var g got
	if err := json.Unmarshal(summary, &g); err != nil {
		add("run", "summary", "decodes", err.Error())
		return ms, truth, summary
	}
	code := int(s.ExitCode())
	if code != truth.ExitCode {
		add("run", "exit_code", fmt.Sprint(truth.ExitCode), fmt.Sprint(code))
	}
	// §14 maps the rows (and thresholds) to the exit code: the checker's
	// own rows must give its own exit code.
	if own := ownExitCode(&g); own != code {
		add("run", "exit_code (from the checker's own rows, §14)", fmt.Sprint(own), fmt.Sprint(code))
	}
	if len(g.Cases) != len(truth.Cases) {
		add("run", "cases", fmt.Sprint(len(truth.Cases)), fmt.Sprint(len(g.Cases)))
	}
	for i, tc := range truth.Cases {
		if i >= len(g.Cases) {
			break
		}
		gc := g.Cases[i]
		tags = tc.Tags
		if truth.Journal {
			tags += " journal"
		}
		where := fmt.Sprintf("case %d %q", i+1, tc.Name)
		cmp := func(field string, want, gotv any) {
			if _, skip := tc.Any[field]; skip {
				return
			}
			if ws, ok := want.(string); ok && ws == sim.Any {
				return
			}
			if alt, ok := tc.Alt[field]; ok && alt == fmt.Sprint(gotv) {
				return
			}
			if fmt.Sprint(want) != fmt.Sprint(gotv) {
				add(where, field, fmt.Sprint(want), fmt.Sprint(gotv))
			}
		}
		c := gc.Check
		if tc.Status != c.Status {
			add(where, "status", fmt.Sprintf("%s %q %q", tc.Status, tc.InvalidReasons, tc.Unmet), fmt.Sprintf("%s %q %q", c.Status, c.InvalidReasons, c.Unmet))
		}
		cmp("valid", tc.Valid, c.Valid)
		cmp("mutual_exclusion", tc.MutualExclusion, c.MutualExclusion)
		cmp("violations", tc.Violations, c.Violations)
		cmp("acquires_ok", tc.AcquiresOK, c.AcquiresOK)
		cmp("acquires_failed", tc.AcquiresFailed, c.AcquiresFailed)
		cmp("acquires_unknown", tc.AcquiresUnknown, c.AcquiresUnknown)
		cmp("duplicate_grants", tc.DuplicateGrants, c.DuplicateGrants)
		cmp("releases_not_held", tc.ReleasesNotHeld, c.ReleasesNotHeld)
		cmp("leases_lost", tc.LeasesLost, c.LeasesLost)
		cmp("wrong_token_releases_accepted", tc.WrongTokenReleasesAccepted, c.WrongToken)
		cmp("token_regressions", tc.TokenRegressions, c.TokenRegr)
		cmp("resource.verdict", tc.Resource.Verdict, c.Resource.Verdict)
		cmp("resource.lost_updates", tc.Resource.LostUpdates, c.Resource.LostUpdates)
		cmp("resource.stale_rejected", tc.Resource.StaleRejected, c.Resource.StaleRejected)
		cmp("resource.stale_reads_rejected", tc.Resource.StaleReadsRejected, c.Resource.StaleReadsRejected)
		cmp("resource.stale_accepted", tc.Resource.StaleAccepted, c.Resource.StaleAccepted)
		cmp("resource.token_reuse", tc.Resource.TokenReuse, c.Resource.TokenReuse)
		cmp("liveness.verdict", tc.Liveness, c.Liveness.Verdict)
		if _, skip := tc.Any["liveness.longest_gap_ms"]; !skip && tc.LongestGapNs >= 0 {
			want := float64(tc.LongestGapNs) / 1e6
			if math.Abs(want-c.Liveness.LongestGapMs) > 1e-6 {
				add(where, "liveness.longest_gap_ms", strconv.FormatFloat(want, 'f', 6, 64), strconv.FormatFloat(c.Liveness.LongestGapMs, 'f', 6, 64))
			}
		}
		for _, f := range tc.Faults {
			if f.Verdict == sim.Any {
				continue
			}
			gv := "(absent)"
			for _, gf := range c.Liveness.Faults {
				if gf.Fault == f.Fault {
					gv = gf.Verdict
				}
			}
			if gv != f.Verdict && !(f.Verdict == "" && gv == "(absent)") {
				add(where+" fault "+f.Fault, "liveness.faults[].verdict", fmt.Sprintf("%q", f.Verdict), fmt.Sprintf("%q", gv))
			}
		}
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
				if math.Abs(gt.Observed-th.Observed) > 1e-6 {
					add(where, "thresholds[].observed", fmt.Sprintf("%s: %v", th.Source, th.Observed), fmt.Sprint(gt.Observed))
				}
				if gt.Pass != th.Pass {
					add(where, "thresholds[].pass", fmt.Sprintf("%s: %v", th.Source, th.Pass), fmt.Sprint(gt.Pass))
				}
			}
			if !found {
				add(where, "thresholds[]", th.Source, "(absent)")
			}
		}
		cmp("linearizability.verdict", tc.Lin, gc.Linearizability.Verdict)
		cmp("linearizability.fenced_verdict", tc.LinFenced, gc.Linearizability.FencedVerdict)
	}
	tags = truth.Describe
	for _, tr := range truth.Rows {
		var gr *struct {
			Row     string `json:"row"`
			Verdict string `json:"verdict"`
			Met     int    `json:"met"`
			Trials  int    `json:"trials"`
			Need    int    `json:"need"`
		}
		for i := range g.Rows {
			if g.Rows[i].Row == tr.Row {
				gr = &g.Rows[i]
			}
		}
		where := fmt.Sprintf("row %q", tr.Row)
		if gr == nil {
			add(where, "row", "present", "absent")
			continue
		}
		cmp := func(field string, want, gotv any) {
			if _, skip := tr.Any[field]; skip {
				return
			}
			if fmt.Sprint(want) != fmt.Sprint(gotv) {
				add(where, field, fmt.Sprint(want), fmt.Sprint(gotv))
			}
		}
		cmp("verdict", tr.Verdict, gr.Verdict)
		cmp("met", tr.Met, gr.Met)
		cmp("trials", tr.Trials, gr.Trials)
		cmp("need", tr.Need, gr.Need)
	}
	if len(g.Rows) != len(truth.Rows) {
		add("run", "rows", fmt.Sprint(len(truth.Rows)), fmt.Sprint(len(g.Rows)))
	}
	return ms, truth, summary
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

// TestAgainstChecker compares the checker's verdicts with the simulator's
// truth, field by field, for seeds 1..N.
func TestAgainstChecker(t *testing.T) {
	from, to := seeds()
	type res struct {
		ms      []mismatch
		truth   *sim.Truth
		summary []byte
	}
	results := make([]res, to-from+1)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for s := from; s <= to; s++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(s uint64) {
			defer wg.Done()
			defer func() { <-sem }()
			ms, truth, summary := compare(s)
			results[s-from] = res{ms, truth, summary}
		}(s)
	}
	wg.Wait()
	var all []mismatch
	statuses := map[string]int{}
	out := ""
	saved := 0
	for i, r := range results {
		seed := from + uint64(i)
		for _, c := range r.truth.Cases {
			statuses[c.Status]++
		}
		if *flagOut != "" {
			save(*flagOut, seed, r.truth, r.summary)
		}
		if len(r.ms) == 0 {
			continue
		}
		if out == "" {
			out = mismatchDir(t)
		}
		dir := fmt.Sprintf("(not saved: SIM_SEED=%d go test ./internal/sim -run AgainstChecker)", seed)
		if saved < maxSaved || *flagOut != "" {
			dir = save(out, seed, r.truth, r.summary)
			saved++
		}
		for j := range r.ms {
			r.ms[j].dir = dir
		}
		all = append(all, r.ms...)
	}
	t.Logf("statuses in the truth over seeds %d..%d: %v", from, to, statuses)
	if len(all) == 0 {
		return
	}
	byField := map[string][]mismatch{}
	for _, m := range all {
		byField[m.field] = append(byField[m.field], m)
	}
	var fields []string
	for f := range byField {
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool { return len(byField[fields[i]]) > len(byField[fields[j]]) })
	var b strings.Builder
	for _, f := range fields {
		ms := byField[f]
		fmt.Fprintf(&b, "%5d  %s\n", len(ms), f)
		for k, m := range ms {
			if k == 3 && os.Getenv("SIM_VERBOSE") == "" {
				break
			}
			fmt.Fprintf(&b, "         %s\n           history and truth: %s\n", m, m.dir)
		}
	}
	t.Errorf("%d mismatches between the checker and the truth (MODEL.md), by field:\n%s", len(all), b.String())
}

// FuzzSimulate does the comparison for one seed.
func FuzzSimulate(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		ms, truth, summary := compare(seed)
		if len(ms) == 0 {
			return
		}
		dir := save(mismatchDir(t), seed, truth, summary)
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "  %s\n", m)
		}
		t.Errorf("seed %d: %d mismatches (history and truth in %s):\n%s", seed, len(ms), dir, b.String())
	})
}
