package history

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenRecovered: the tail journal's events newer than the history's
// last are appended in time order; those already written are not repeated.
func TestOpenRecovered(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "history.jsonl")
	tail := filepath.Join(dir, "history.tail.jsonl")
	os.WriteFile(hist, []byte(`{"t":1,"type":"mark","f":"case-start"}
{"t":5,"type":"mark","f":"case-stop"}
{"t":5,"type":"mark","f":"harness"}
`), 0o644)
	os.WriteFile(tail, []byte(`{"t":5,"type":"mark","f":"harness"}
{"t":9,"type":"mark","f":"case-end"}
{"t":5,"type":"mark","f":"crash","proc":"i1"}
{"t":3,"type":"mark","f":"fault-idle","fault":"x"}
{"t":7,"type":"mark","f":"cut`), 0o644)
	r, n, err := OpenRecovered(hist, tail)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	var fs []string
	hr := NewReader(strings.NewReader(string(b)), "x")
	for hr.Next() {
		fs = append(fs, hr.Event().F)
	}
	if got := strings.Join(fs, ","); got != "case-start,case-stop,harness,crash,case-end" || n != 2 {
		t.Errorf("recovered %q (%d), want case-start,case-stop,harness,crash,case-end (2)", got, n)
	}
	os.Remove(tail)
	r, n, err = OpenRecovered(hist, tail)
	if err != nil || n != 0 {
		t.Fatalf("without a journal: %d %v", n, err)
	}
	r.Close()
}

// TestOpenRecoveredCutLine: a history whose last line the crash cut in the
// middle, with the tail journal holding that event whole, reads as the
// complete history: the half line is dropped, not glued to the journal.
func TestOpenRecoveredCutLine(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "history.jsonl")
	tail := filepath.Join(dir, "history.tail.jsonl")
	os.WriteFile(hist, []byte(`{"t":1,"type":"mark","f":"case-start"}
{"t":5,"type":"mark","f":"case-stop"}
{"t":9,"type":"mark","f":"case`), 0o644)
	os.WriteFile(tail, []byte(`{"t":5,"type":"mark","f":"case-stop"}
{"t":9,"type":"mark","f":"case-end"}
`), 0o644)
	r, n, err := OpenRecovered(hist, tail)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	hr := NewReader(strings.NewReader(string(b)), "x")
	var fs []string
	for hr.Next() {
		fs = append(fs, hr.Event().F)
	}
	if err := hr.Err(); err != nil || hr.Truncated() != "" {
		t.Fatalf("err %v, truncated %q", err, hr.Truncated())
	}
	if got := strings.Join(fs, ","); got != "case-start,case-stop,case-end" || n != 1 {
		t.Errorf("recovered %q (%d), want case-start,case-stop,case-end (1)", got, n)
	}
}
