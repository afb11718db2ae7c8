package verdict

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lockbench/lockbench/history"
)

// TestDigestTellsCopiesApart: a history written twice into one file gives
// each trial's copy the trial's digest, and no two trials one digest
// (MODEL §18, A5); a Stream fed the events one by one (the runner's way)
// gives the digests AnalyzeFile gives, so summaries of either compare.
func TestDigestTellsCopiesApart(t *testing.T) {
	path := filepath.Join("..", "checker", "testdata", "figures", "repeated-run.jsonl")
	sum, err := AnalyzeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 12 {
		t.Fatalf("%d cases, want 12", len(sum.Cases))
	}
	for i := range 6 {
		a, b := sum.Cases[i].Digest, sum.Cases[i+6].Digest
		if a == "" || a != b {
			t.Errorf("trial %d: digests %q and %q, want one", i+1, a, b)
		}
		for j := range i {
			if sum.Cases[j].Digest == a {
				t.Errorf("trials %d and %d share digest %s", j+1, i+1, a)
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st := NewStream()
	r := history.NewReader(f, path)
	for r.Next() {
		if _, err := st.Add(r.Event()); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range st.Summary().Cases {
		if c.Digest != sum.Cases[i].Digest {
			t.Errorf("case %d: Stream digest %s, AnalyzeFile %s", i, c.Digest, sum.Cases[i].Digest)
		}
	}
}

// TestDigestOfLanes: lanes of one case have digests of their own.
func TestDigestOfLanes(t *testing.T) {
	sum, err := AnalyzeFile(filepath.Join("testdata", "lanes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range sum.Cases {
		if seen[c.Digest] {
			t.Errorf("lane %s of %s repeats digest %s", c.Check.Meta.Name, c.Check.Case, c.Digest)
		}
		seen[c.Digest] = true
	}
	if len(seen) < 2 {
		t.Errorf("%d digests over %d cases", len(seen), len(sum.Cases))
	}
}
