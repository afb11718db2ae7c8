package results

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Threshold is one parsed pass/fail criterion on a case's metrics, in the
// spirit of k6 thresholds. Grammar:
//
//	threshold -> metric ws* op ws* number unit?
//	op        -> "<" | "<=" | ">" | ">=" | "==" | "!="
//	unit      -> "us" | "µs" | "ms" | "s" | "m"      (duration metrics)
//	           | "/s"                                (rate metrics)
//	           |                                     (count metrics)
//
// Examples: "acquire_p99 < 50ms", "violations == 0", "throughput > 500/s".
// Thresholds are validated before a run: an unknown metric, a unit that does
// not fit the metric or a malformed expression is a config error, so a typo
// cannot make a gate pass silently (the lesson of k6#1526).
type Threshold struct {
	Source string  `json:"threshold"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"` // in the metric's base unit: ms, per second, or a count
}

type metricKind int

const (
	kindDuration metricKind = iota // milliseconds
	kindRate                       // per second
	kindCount
)

type metricDef struct {
	kind metricKind
	doc  string
	get  func(c *CaseSummary) float64
}

var thresholdMetrics = map[string]metricDef{
	"acquire_p50":           {kindDuration, "acquire latency p50", func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P50 }},
	"acquire_p90":           {kindDuration, "acquire latency p90", func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P90 }},
	"acquire_p99":           {kindDuration, "acquire latency p99", func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P99 }},
	"acquire_p999":          {kindDuration, "acquire latency p99.9", func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P999 }},
	"acquire_max":           {kindDuration, "acquire latency max", func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.Max }},
	"longest_gap":           {kindDuration, "longest time a key went without an acquisition", func(c *CaseSummary) float64 { return c.Metrics.LongestGapMs }},
	"throughput":            {kindRate, "successful acquisitions per second", func(c *CaseSummary) float64 { return c.Metrics.AcquiresPerSec }},
	"acquisitions":          {kindCount, "successful acquisitions", func(c *CaseSummary) float64 { return float64(c.Metrics.Acquisitions) }},
	"acquires_failed":       {kindCount, "acquisitions that certainly failed", func(c *CaseSummary) float64 { return float64(c.Metrics.AcquiresFailed) }},
	"acquires_unknown":      {kindCount, "acquisitions with an unknown outcome", func(c *CaseSummary) float64 { return float64(c.Metrics.AcquiresUnknown) }},
	"violations":            {kindCount, "mutual-exclusion violations", func(c *CaseSummary) float64 { return float64(c.Check.Violations) }},
	"lost_updates":          {kindCount, "lost updates on the unfenced resource", func(c *CaseSummary) float64 { return float64(c.Check.Resource.LostUpdates) }},
	"stale_writes_accepted": {kindCount, "stale writes the fenced resource let through", func(c *CaseSummary) float64 { return float64(c.Check.Resource.StaleAccepted) }},
	"stale_writes_rejected": {kindCount, "stale writes the fenced resource stopped", func(c *CaseSummary) float64 { return float64(c.Check.Resource.StaleRejected) }},
	"token_regressions":     {kindCount, "fencing tokens that went backwards", func(c *CaseSummary) float64 { return float64(c.Check.TokenRegressions) }},
	"leases_lost":           {kindCount, "lease-lost signals", func(c *CaseSummary) float64 { return float64(c.Check.LeasesLost) }},
}

// ThresholdMetrics lists the metric names a threshold may use.
func ThresholdMetrics() []string {
	out := make([]string, 0, len(thresholdMetrics))
	for k := range thresholdMetrics {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var ops = []string{"<=", ">=", "==", "!=", "<", ">"} // two-character operators first

// ParseThreshold parses and validates one threshold expression.
func ParseThreshold(src string) (Threshold, error) {
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
	def, ok := thresholdMetrics[t.Metric]
	if !ok {
		return t, fmt.Errorf("threshold %q: unknown metric %q (known: %s)", src, t.Metric, strings.Join(ThresholdMetrics(), ", "))
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
	switch def.kind {
	case kindDuration:
		if unit == "" {
			return t, fmt.Errorf("threshold %q: %s is a duration: give a unit (us, ms, s, m)", src, t.Metric)
		}
		d, err := time.ParseDuration(num + unit)
		if err != nil {
			return t, fmt.Errorf("threshold %q: %q is not a duration unit (us, ms, s, m)", src, unit)
		}
		t.Value = float64(d) / float64(time.Millisecond)
	case kindRate:
		if unit != "/s" && unit != "" {
			return t, fmt.Errorf("threshold %q: %s is a rate: write it as N/s", src, t.Metric)
		}
		t.Value = v
	case kindCount:
		if unit != "" {
			return t, fmt.Errorf("threshold %q: %s is a count and takes no unit", src, t.Metric)
		}
		t.Value = v
	}
	return t, nil
}

// Verdict is a threshold evaluated on a case.
type Verdict struct {
	Threshold
	Observed float64 `json:"observed"`
	Pass     bool    `json:"pass"`
}

// String prints the verdict as k6 does: ✓ 'acquire_p99 < 50ms' acquire_p99=31.2ms
func (v Verdict) String() string {
	mark := "✓"
	if !v.Pass {
		mark = "✗"
	}
	unit := ""
	switch thresholdMetrics[v.Metric].kind {
	case kindDuration:
		unit = "ms"
	case kindRate:
		unit = "/s"
	}
	return fmt.Sprintf("%s '%s' %s=%s%s", mark, v.Source, v.Metric, strconv.FormatFloat(v.Observed, 'f', -1, 64), unit)
}

// Evaluate checks t against a case.
func (t Threshold) Evaluate(c *CaseSummary) Verdict {
	got := thresholdMetrics[t.Metric].get(c)
	got = math.Round(got*1000) / 1000
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
