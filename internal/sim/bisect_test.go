package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/sim"
	"github.com/lockbench/lockbench/verdict"
)

// TestBisectLinearizability is a diagnostic, not a test: for a case whose
// linearizability the checker calls a violation where the truth has a
// witness, it finds the shortest prefix of the case the checker already
// calls a violation, and prints its last events (the operation that the
// checker cannot place).
//
//	SIM_BISECT=SEED:CASE go test ./internal/sim -run BisectLin -v
func TestBisectLinearizability(t *testing.T) {
	arg := os.Getenv("SIM_BISECT")
	if arg == "" {
		t.Skip("set SIM_BISECT=SEED:CASE (CASE 1-based)")
	}
	parts := strings.SplitN(arg, ":", 2)
	seed, _ := strconv.ParseUint(parts[0], 10, 64)
	ci := 1
	if len(parts) == 2 {
		ci, _ = strconv.Atoi(parts[1])
	}
	r := sim.Simulate(seed)
	h, _ := r.Files()
	lines := strings.Split(strings.TrimRight(string(h), "\n"), "\n")
	start, k := -1, 0
	for i, l := range lines {
		if strings.Contains(l, `"case-start"`) {
			if k++; k == ci {
				start = i
			}
		}
	}
	if start < 0 {
		t.Fatalf("seed %d has no case %d in its history file", seed, ci)
	}
	end := start + 1
	for end < len(lines) && !strings.Contains(lines[end], `"case-end"`) && !strings.Contains(lines[end], `"case-start"`) {
		end++
	}
	body := lines[start+1 : end]
	if n := len(body); n > 0 && !json.Valid([]byte(body[n-1])) {
		body = body[:n-1] // a line cut short
	}
	verdict := func(n int) string {
		var b bytes.Buffer
		b.WriteString(lines[start] + "\n")
		for _, l := range body[:n] {
			b.WriteString(l + "\n")
		}
		// end the case just after the prefix
		var last struct{ T int64 }
		json.Unmarshal([]byte(body[n-1]), &last)
		fmt.Fprintf(&b, `{"t":%d,"type":"mark","f":"case-end"}`+"\n", last.T+1)
		s, err := verdict.Analyze(history.NewReader(&b, "prefix"))
		if err != nil || len(s.Cases) == 0 {
			return "error"
		}
		return string(s.Cases[0].Linearizability.Verdict)
	}
	if v := verdict(len(body)); v != "violation" {
		t.Skipf("the checker says %s of the whole case", v)
	}
	lo, hi := 1, len(body)
	for lo < hi {
		mid := (lo + hi) / 2
		if verdict(mid) == "violation" {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	fmt.Printf("seed %d case %d: the shortest prefix the checker calls a violation ends at event %d of the case:\n", seed, ci, lo)
	for _, l := range body[max(0, lo-25):lo] {
		fmt.Println("  " + l)
	}
}
