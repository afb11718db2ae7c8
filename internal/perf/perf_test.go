package perf

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestTable: medians over rounds, ratios of the medians, and the range of
// each round's own ratio (the bare loop of the same round as reference).
func TestTable(t *testing.T) {
	r := Result{Backend: "redis", Samples: map[Variant][]Sample{
		Bare:   {{Cycles: 40000, CPUCores: 1.05}, {Cycles: 44000, CPUCores: 1.07}, {Cycles: 42000, CPUCores: 1.06}},
		Full:   {{Cycles: 22000, CPUCores: 1.30, Coord: 0.28}, {Cycles: 24000, CPUCores: 1.33, Coord: 0.30}, {Cycles: 23000, CPUCores: 1.31, Coord: 0.29}},
		Direct: {{Cycles: 36000, CPUCores: 1.1}, {Cycles: 35200, CPUCores: 1.1}, {Cycles: 37800, CPUCores: 1.1}},
	}}
	var buf bytes.Buffer
	Table(&buf, []Result{r}, Options{Clients: 64, Rounds: 3, Duration: 5 * time.Second})
	golden := filepath.Join("testdata", "table.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("table:\n%s\nwant:\n%s", buf.Bytes(), want)
	}
	if got := r.Ratios(Direct); len(got) != 3 || got[0] != 0.9 || got[1] != 0.8 || got[2] != 0.9 {
		t.Errorf("direct ratios %v, want [0.9 0.8 0.9]", got)
	}
}
