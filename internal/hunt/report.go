package hunt

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Summary is the hunt's outcome in a few lines: what was found and how
// small it got, or what was searched and what that bounds. Never "safe":
// a search that found nothing bounds a rate over the space it searched.
func (r *Result) Summary(c Config) []string {
	var out []string
	out = append(out, fmt.Sprintf("searched: %d trials (%d decided, %d invalid) in %d batches side by side, %s of a %s budget; %s",
		r.Trials, r.Decided, r.Invalid, r.Batches, r.searchTime(), c.Budget, r.Coverage))
	f := r.Finding
	if f == nil {
		what := "no two holders and no late write landed"
		if c.DamageOnly {
			what = "no late write landed (two holders were not looked for: the work is in the lock's own store)"
		}
		if c.Liveness {
			what += ", and no lock that never came back,"
		}
		out = append(out, fmt.Sprintf("found nothing: %s in %d decided trials over this space: 95%% ≤ %.1f%% per trial (not \"safe\": a bound over what was searched)",
			what, r.Decided, 100*r.Bound.High))
		var least []string
		for _, cl := range r.Coverage.Least(5) {
			least = append(least, fmt.Sprintf("%s/%s/%s=%d", cl.Kind, cl.Phase, cl.Window, r.Coverage.Count[cl]))
		}
		out = append(out, "least covered (kind/phase/window=faults): "+strings.Join(least, ", "))
		if len(r.Accidents) > 0 {
			out = append(out, fmt.Sprintf("%d failure(s) did not recur in %d of %d replays (not counted as findings): %s", len(r.Accidents), c.Need, c.Replays, r.accidents()))
		}
		return out
	}
	out = append(out, fmt.Sprintf("found: %s in %s (faults landing in %s): %s", f.Class, f.Trial, strings.Join(f.Phases, ", "), f.Schedule))
	out = append(out, fmt.Sprintf("recurs: %s replays of its realized schedule (need %d)", f.Replays, c.Need))
	if r.Smallest != nil {
		kept := 0
		for _, s := range r.Shrink {
			if s.Kept {
				kept++
			}
		}
		n, _, _, _ := r.Smallest.Size()
		out = append(out, fmt.Sprintf("shrunk: %d of %d steps kept → %d fault(s): %s", kept, len(r.Shrink), n, r.Smallest))
	}
	if r.Verified != nil {
		out = append(out, fmt.Sprintf("the written scenario reproduced in %s trials", *r.Verified))
	}
	return out
}

// searchTime is the time the search itself took (its batches; Elapsed
// adds confirming and shrinking).
func (r *Result) searchTime() time.Duration { return r.Searched.Round(time.Second) }

func (r *Result) accidents() string {
	var s []string
	for _, a := range r.Accidents {
		s = append(s, fmt.Sprintf("%s %s (%s)", a.Trial, a.Class, a.Replays))
	}
	return strings.Join(s, "; ")
}

// Markdown is the hunt's report: the summary, the space, the finding,
// every shrinking step, the smallest schedule as a scenario, and the
// coverage table.
func (r *Result) Markdown(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# bench hunt: %s\n\n", c.Backend)
	fmt.Fprintf(&b, "Seed %d, started %s, %s in all (search, confirmation, shrinking).\n\n", c.Seed, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(time.Second))
	for _, l := range r.Summary(c) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "\n## The space\n\n")
	fmt.Fprintf(&b, "- fault kinds: %s\n- targets: %s\n- windows: %s × the lease (%s)\n- 1 to %d faults a trial, each later one starting within a lease of the one before (overlapping it or following it)\n- %d trials side by side a batch, each %d instance(s) × %d client(s)\n",
		weights(c.Space.Kinds), weights(c.Space.Targets), floats(c.Space.Windows), c.Space.Lease, c.Space.MaxFaults, c.Batch, c.Base.Instances, c.Base.Clients)
	if len(r.Tried) > 0 {
		var ks []string
		for k := range r.Tried {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var s []string
		for _, k := range ks {
			s = append(s, fmt.Sprintf("%s ×%d", k, r.Tried[k]))
		}
		fmt.Fprintf(&b, "- tried: %s\n", strings.Join(s, ", "))
	}
	if f := r.Finding; f != nil {
		fmt.Fprintf(&b, "\n## The finding\n\n%s in trial `%s` of `%s`: %s. Its faults began while the lock was %s. Replayed %d times from its realized schedule (plan seed %d, times as they ran): %s in %s, %d replay(s) invalid.\n",
			f.Class, f.Trial, f.Run, f.Schedule, strings.Join(f.Phases, ", "), c.Replays, f.Schedule.PlanSeed, f.Class, f.Replays, f.Invalid)
	}
	if len(r.Shrink) > 0 {
		fmt.Fprintf(&b, "\n## Shrinking\n\nEach step kept only when the failure recurred in at least %d of %d replays.\n\n| round | step | recurred | invalid | kept |\n|---:|---|---:|---:|---|\n", c.Need, c.Replays)
		for _, s := range r.Shrink {
			k := "no"
			if s.Kept {
				k = "yes"
			}
			fmt.Fprintf(&b, "| %d | %s | %d of %d | %d | %s |\n", s.Round, s.Step, s.Hits, s.Of, s.Invalid, k)
		}
	}
	if r.Written != "" {
		fmt.Fprintf(&b, "\n## The smallest schedule\n\n`shrunk.yaml` (`bench validate` checks it, `bench run` reproduces it):\n\n```yaml\n%s```\n", r.Written)
		if r.Verified != nil {
			fmt.Fprintf(&b, "\nRun once more: %s in %s trials.\n", r.Finding.Class, *r.Verified)
		}
	}
	if len(r.Accidents) > 0 {
		fmt.Fprintf(&b, "\n## Failures that did not recur\n\n%s\n", r.accidents())
	}
	fmt.Fprintf(&b, "\n## Coverage\n\nFaults that took effect, by kind, the lock's phase when each began (seen from the clients of the instance it hit, or of the whole trial) and its window in leases; %d never took effect.\n\n%s", r.Coverage.Unapplied, r.Coverage.Table())
	fmt.Fprintf(&b, "\n## Runs\n\n")
	for _, d := range r.Runs {
		fmt.Fprintf(&b, "- `%s`\n", d)
	}
	return b.String()
}

func weights(ws []Weighted) string {
	var s []string
	for _, w := range ws {
		s = append(s, fmt.Sprintf("%s (%d)", w.Value, w.Weight))
	}
	return strings.Join(s, ", ")
}

func floats(fs []float64) string {
	var s []string
	for _, f := range fs {
		s = append(s, fmt.Sprint(f))
	}
	return strings.Join(s, ", ")
}
