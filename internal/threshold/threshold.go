// Package threshold is the grammar of pass/fail criteria on a case's
// metrics, in the spirit of k6 thresholds. It knows metric names and their
// kinds, not how a metric is computed: the scenario parser validates
// thresholds with it before a run, and the report layer evaluates them
// after, each without importing the other.
//
// Grammar:
//
//	threshold -> metric ws* op ws* number unit?
//	op        -> "<" | "<=" | ">" | ">=" | "==" | "!="
//	unit      -> "us" | "µs" | "ms" | "s" | "m"      (duration metrics)
//	           | "/s"                                (rate metrics)
//	           |                                     (count metrics)
//
// Examples: "acquire_p99 < 50ms", "violations == 0", "throughput > 500/s".
// An unknown metric, a unit that does not fit the metric or a malformed
// expression is an error, so a typo cannot make a gate pass silently (the
// lesson of k6#1526).
package threshold

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is the kind of a metric, which decides its unit.
type Kind int

// The metric kinds.
const (
	Duration Kind = iota // milliseconds
	Rate                 // per second
	Count
)

// Metric is a metric a threshold may name.
type Metric struct {
	Name string
	Kind Kind
	Doc  string
}

var metrics = map[string]Metric{}

func def(name string, k Kind, doc string) { metrics[name] = Metric{Name: name, Kind: k, Doc: doc} }

func init() {
	def("acquire_p50", Duration, "acquire latency p50")
	def("acquire_p90", Duration, "acquire latency p90")
	def("acquire_p99", Duration, "acquire latency p99")
	def("acquire_p999", Duration, "acquire latency p99.9")
	def("acquire_max", Duration, "acquire latency max")
	def("handoff_p50", Duration, "hand-off latency p50 (a release to the next holder's grant)")
	def("handoff_p99", Duration, "hand-off latency p99")
	def("longest_gap", Duration, "longest time a key was unavailable: a live client waited and no live client held it")
	def("overlap_max", Duration, "longest time two holders coexisted")
	def("overlap_p50", Duration, "median time two holders coexisted")
	def("zombie_max", Duration, "longest time a holder went on believing after the service had taken its grant back")
	def("zombie_p50", Duration, "median zombie time")
	def("zombies", Count, "holders that went on believing after the service had taken their grant back")
	def("throughput", Rate, "successful acquisitions per second")
	def("acquisitions", Count, "successful acquisitions")
	def("acquires_failed", Count, "acquisitions that certainly failed")
	def("acquires_unknown", Count, "acquisitions with an unknown outcome")
	def("acquires_dropped", Count, "open-loop attempts that could not start on time")
	def("violations", Count, "mutual-exclusion violations")
	def("lost_updates", Count, "lost updates on the unfenced resource")
	def("stale_writes_accepted", Count, "stale writes the fenced resource let through")
	def("stale_writes_rejected", Count, "late writes the fenced resource stopped")
	def("token_regressions", Count, "acquisitions whose fencing token was not above the highest granted before")
	def("leases_lost", Count, "lease-lost signals")
	// A job workload's figures (checker/MODEL.md §20); no value in a
	// case of the lock loop.
	def("duplicate_effects", Count, "jobs: effects the sink applied beyond each job's first")
	def("jobs_duplicated", Count, "jobs: jobs whose effect was applied twice or more")
	def("stale_effects_accepted", Count, "jobs: effects applied below a token already applied for their job")
	def("lost_jobs", Count, "jobs: due jobs with no applied effect")
	def("stuck_max", Duration, "jobs: the longest a job stayed with a paused or dead executor before it was taken up or done")
	def("completion_p50", Duration, "jobs: completion latency p50 (a job's due time to its first completion)")
	def("completion_p99", Duration, "jobs: completion latency p99")
	def("jobs_per_s", Rate, "jobs: jobs with an applied effect per second")
	def("periods_missed", Count, "periodic jobs: due periods with no applied effect sent before the next period")
	def("delay_p50", Duration, "periodic jobs: delay from a period's due time to its first applied effect, p50")
	def("delay_p99", Duration, "periodic jobs: that delay's p99")
	def("most_in_one_period", Count, "periodic jobs: the most effects applied for one period (recomputations of one expiry)")
	def("served_stale", Count, "periodic jobs: tries served without recomputing and without an attempt (the lock was busy)")
	def("served_fresh", Count, "periodic jobs: tries that made an attempt and applied nothing (found it done, absorbed)")
	def("wait_p99", Duration, "periodic jobs: how long a try served without recomputing waited, p99")
}

// Metrics lists the metrics a threshold may use, sorted by name.
func Metrics() []Metric {
	out := make([]Metric, 0, len(metrics))
	for _, m := range metrics {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names lists the metric names, sorted.
func Names() []string {
	var out []string
	for _, m := range Metrics() {
		out = append(out, m.Name)
	}
	return out
}

// Lookup returns the metric called name.
func Lookup(name string) (Metric, bool) {
	m, ok := metrics[name]
	return m, ok
}

// Threshold is one parsed criterion.
type Threshold struct {
	Source string  `json:"threshold"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"` // in the metric's base unit: ms, per second, or a count
}

var ops = []string{"<=", ">=", "==", "!=", "<", ">"} // two-character operators first

// Parse parses and validates one threshold expression.
func Parse(src string) (Threshold, error) {
	t := Threshold{Source: strings.TrimSpace(src)}
	s := t.Source
	i := strings.IndexAny(s, "<>=!")
	if i <= 0 {
		return t, fmt.Errorf("threshold %q: want <metric> <op> <value>, e.g. acquire_p99 < 50ms", src)
	}
	t.Metric = strings.TrimSpace(s[:i])
	rest := s[i:]
	for _, op := range ops {
		if strings.HasPrefix(rest, op) {
			t.Op = op
			rest = strings.TrimSpace(rest[len(op):])
			break
		}
	}
	if t.Op == "" {
		return t, fmt.Errorf("threshold %q: unknown operator (use one of < <= > >= == !=)", src)
	}
	m, ok := metrics[t.Metric]
	if !ok {
		return t, fmt.Errorf("threshold %q: unknown metric %q (known: %s)", src, t.Metric, strings.Join(Names(), ", "))
	}
	num := rest
	j := strings.IndexFunc(rest, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+' || r == 'e' || r == 'E')
	})
	unit := ""
	if j >= 0 {
		num, unit = rest[:j], strings.TrimSpace(rest[j:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return t, fmt.Errorf("threshold %q: %q is not a number", src, num)
	}
	switch m.Kind {
	case Duration:
		if unit == "" {
			return t, fmt.Errorf("threshold %q: %s is a duration: give a unit (us, ms, s, m)", src, t.Metric)
		}
		d, err := time.ParseDuration(num + unit)
		if err != nil {
			return t, fmt.Errorf("threshold %q: %q is not a duration unit (us, ms, s, m)", src, unit)
		}
		t.Value = float64(d) / float64(time.Millisecond)
	case Rate:
		if unit != "/s" && unit != "" {
			return t, fmt.Errorf("threshold %q: %s is a rate: write it as N/s", src, t.Metric)
		}
		t.Value = v
	case Count:
		if unit != "" {
			return t, fmt.Errorf("threshold %q: %s is a count and takes no unit", src, t.Metric)
		}
		t.Value = v
	}
	return t, nil
}

// Verdict is a threshold evaluated on an observed value.
type Verdict struct {
	Threshold
	Observed float64 `json:"observed"`
	Pass     bool    `json:"pass"`
	// NoValue says why the figure had no value (a latency with no sample,
	// a case cut short): the threshold then fails, never passes.
	NoValue string `json:"no_value,omitempty"`
}

// NoValue is the verdict of t on a figure that has no value: failed, and
// why.
func (t Threshold) NoValue(why string) Verdict {
	return Verdict{Threshold: t, Pass: false, NoValue: why}
}

// Judge compares an observed value (in the metric's base unit) with t.
// The value is rounded to 1/1000 first, as it is printed.
//
// The observed value is judged as it is, never rounded: a threshold and the
// summary it reads agree on every figure (checker/MODEL.md §15); only
// String rounds it, for people.
func (t Threshold) Judge(observed float64) Verdict {
	got := observed
	var pass bool
	switch t.Op {
	case "<":
		pass = got < t.Value
	case "<=":
		pass = got <= t.Value
	case ">":
		pass = got > t.Value
	case ">=":
		pass = got >= t.Value
	case "==":
		pass = got == t.Value
	case "!=":
		pass = got != t.Value
	}
	return Verdict{Threshold: t, Observed: got, Pass: pass}
}

// String prints the verdict as k6 does: ✓ 'acquire_p99 < 50ms' acquire_p99=31.2ms
func (v Verdict) String() string {
	mark := "✓"
	if !v.Pass {
		mark = "✗"
	}
	unit := ""
	switch metrics[v.Metric].Kind {
	case Duration:
		unit = "ms"
	case Rate:
		unit = "/s"
	}
	if v.NoValue != "" {
		return fmt.Sprintf("%s '%s' %s has no value (%s)", mark, v.Source, v.Metric, v.NoValue)
	}
	return fmt.Sprintf("%s '%s' %s=%s%s", mark, v.Source, v.Metric, strconv.FormatFloat(math.Round(v.Observed*1000)/1000, 'f', -1, 64), unit)
}
