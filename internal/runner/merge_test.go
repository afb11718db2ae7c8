package runner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/history"
	"github.com/lockbench/lockbench/internal/monoclock"
)

func written(t *testing.T, buf *bytes.Buffer) []int64 {
	t.Helper()
	r := history.NewReader(strings.NewReader(buf.String()), "merged")
	var ts []int64
	for r.Next() {
		ts = append(ts, r.Event().T)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	return ts
}

// TestMergerOrdersByWatermark: events of two sources arriving interleaved
// are written in time order, and only once every live source has reported
// a later time; a silent (paused) source holds the others back until it
// speaks or its stream ends.
func TestMergerOrdersByWatermark(t *testing.T) {
	var buf bytes.Buffer
	base := monoclock.Now() - 1_000_000_000 // the sources' clocks are "1s in"
	m := newMerger(history.NewWriter(&buf), base)
	m.addSource(1)
	m.addSource(2)
	ev := func(ts int64) *history.Event {
		return &history.Event{T: ts, Type: history.OK, F: history.OpAcquire, Proc: "p", Key: "k"}
	}
	now := monoclock.Since(base)
	m.push(1, ev(now+10))
	m.push(1, ev(now+30))
	m.push(2, ev(now+20))
	if err := m.flush(false); err != nil {
		t.Fatal(err)
	}
	// Source 1 has reported now+30, source 2 only now+20: the watermark is
	// now+20, so now+30 must wait.
	if got := written(t, &buf); len(got) != 2 || got[0] != now+10 || got[1] != now+20 {
		t.Fatalf("after the first flush: %v", got)
	}
	m.push(2, ev(now+25)) // an event from the slow source, older than now+30
	m.advance(2, now+40)
	if err := m.flush(false); err != nil {
		t.Fatal(err)
	}
	got := written(t, &buf)
	want := []int64{now + 10, now + 20, now + 25, now + 30}
	if len(got) != len(want) {
		t.Fatalf("written %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("written %v, want %v", got, want)
		}
	}
	m.removeSource(1)
	m.removeSource(2)
	m.emit(history.Event{Type: history.Mark, F: history.MarkCaseEnd})
	if err := m.flush(true); err != nil {
		t.Fatal(err)
	}
	if got := written(t, &buf); len(got) != 5 || got[4] < now+30 {
		t.Errorf("final: %v", got)
	}
}
