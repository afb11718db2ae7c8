package verdict

import (
	"math"
	"testing"
)

// TestWilson checks the interval against published values (Newcombe 1998,
// table I; and the "0 of 40, at most 8.8%" the decision view prints).
func TestWilson(t *testing.T) {
	tests := []struct {
		hits, n   int
		low, high float64
	}{
		{0, 40, 0, 0.0876},
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
		{5, 5, 0.5655, 1},
		{0, 0, 0, 1},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.hits, tt.n)
		if math.Abs(lo-tt.low) > 5e-4 || math.Abs(hi-tt.high) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = %.4f, %.4f; want %.4f, %.4f", tt.hits, tt.n, lo, hi, tt.low, tt.high)
		}
	}
	if got := NewRate(0, 40).String(); got != "0 of 40, ≤ 8.8%" {
		t.Errorf("String = %q", got)
	}
	if got := NewRate(3, 10).String(); got != "3 of 10, 11%–60%" {
		t.Errorf("String = %q", got)
	}
}
