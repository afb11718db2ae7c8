package verdict

import (
	"encoding/json"
	"fmt"
	"math"
)

// Rate is how often an outcome was seen: Hits of Of decided trials (cases
// whose run could answer, or that proved the outcome anyway), with the
// Wilson score interval at 95% confidence. Wilson rather than the normal
// approximation because the counts here are small and often 0 or n: "0 of
// 40" is "at most 8.8%", not "0%", and one trial says almost nothing.
type Rate struct {
	Hits int     `json:"hits"`
	Of   int     `json:"of"`
	Low  float64 `json:"low"`  // lower bound of the 95% interval, 0..1
	High float64 `json:"high"` // upper bound
}

// z95 is the standard normal quantile for a two-sided 95% interval.
const z95 = 1.959964

// MarshalJSON writes a rate of no decided trial without an interval: it
// has no value (MODEL §17).
func (r Rate) MarshalJSON() ([]byte, error) {
	if r.Of == 0 {
		return []byte(`{"hits":0,"of":0}`), nil
	}
	type plain Rate
	return json.Marshal(plain(r))
}

// NewRate returns hits of n with its Wilson interval.
func NewRate(hits, n int) Rate {
	r := Rate{Hits: hits, Of: n}
	r.Low, r.High = Wilson(hits, n)
	return r
}

// Wilson returns the Wilson score interval of hits successes in n trials
// at 95% confidence; (0, 1) when n is 0: no evidence either way.
func Wilson(hits, n int) (low, high float64) {
	if n <= 0 {
		return 0, 1
	}
	p := float64(hits) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	centre := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / (1 + z2/nf)
	low, high = max(0, centre-half), min(1, centre+half)
	if hits == 0 {
		low = 0
	}
	if hits == n {
		high = 1
	}
	return low, high
}

// String says the rate the way the decision view prints it: "0 of 40,
// ≤ 8.8%", "3 of 10, 11–60%", "5 of 5, ≥ 57%".
func (r Rate) String() string {
	pct := func(x float64) string {
		v := 100 * x
		if v < 10 {
			return fmt.Sprintf("%.1f%%", v)
		}
		return fmt.Sprintf("%.0f%%", v)
	}
	switch {
	case r.Of == 0:
		return "no decided trial"
	case r.Hits == 0:
		return fmt.Sprintf("0 of %d, ≤ %s", r.Of, pct(r.High))
	case r.Hits == r.Of:
		return fmt.Sprintf("%d of %d, ≥ %s", r.Hits, r.Of, pct(r.Low))
	}
	return fmt.Sprintf("%d of %d, %s–%s", r.Hits, r.Of, pct(r.Low), pct(r.High))
}

// Interval is the 95% interval alone, in short: "≤79%", "11–60%".
func (r Rate) Interval() string {
	switch {
	case r.Of == 0:
		return ""
	case r.Hits == 0:
		return fmt.Sprintf("≤%.0f%%", 100*r.High)
	case r.Hits == r.Of:
		return fmt.Sprintf("≥%.0f%%", 100*r.Low)
	}
	return fmt.Sprintf("%.0f–%.0f%%", 100*r.Low, 100*r.High)
}

// MinExposures is how many decided fault exposures, and how many decided
// trials, a cell needs before "safe" is more than a sample of one: below
// it the decision view says the evidence is thin (0 of 10 trials is still
// "at most 28%"; the rate is over trials, so the windows of one trial do
// not narrow it).
const MinExposures = 10
