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
	os.WriteFile(hist, []byte(`{"t":1,"type":"mark","f":"a"}
{"t":5,"type":"mark","f":"b"}
{"t":5,"type":"mark","f":"c"}
`), 0o644)
	os.WriteFile(tail, []byte(`{"t":5,"type":"mark","f":"c"}
{"t":9,"type":"mark","f":"e"}
{"t":5,"type":"mark","f":"d"}
{"t":3,"type":"mark","f":"old"}
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
	if got := strings.Join(fs, ","); got != "a,b,c,d,e" || n != 2 {
		t.Errorf("recovered %q (%d), want a,b,c,d,e (2)", got, n)
	}
	os.Remove(tail)
	r, n, err = OpenRecovered(hist, tail)
	if err != nil || n != 0 {
		t.Fatalf("without a journal: %d %v", n, err)
	}
	r.Close()
}
