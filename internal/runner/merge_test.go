package runner

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/history"
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
		return &history.Event{T: ts, Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k"}
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

// BenchmarkMerger is the coordinator's per-event cost of ordering: events
// of several workers' streams pushed as they arrive (each stream in time
// order, the streams interleaved) and written by periodic flushes, as
// during a run. One op is one event.
func BenchmarkMerger(b *testing.B) {
	for _, sources := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("sources=%d", sources), func(b *testing.B) {
			m := newMerger(history.NewWriter(io.Discard), monoclock.Now())
			for s := range sources {
				m.addSource(s)
			}
			line := history.AppendJSON(nil, &history.Event{T: 1, Type: history.OK, F: history.OpAcquire, Proc: "i1c12", Key: "k12", Token: 7})
			const perFlush = 10000 // about 100 ms of events at 100 k events/s
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t := int64(i) * 10
				m.pushLine(i%sources, t, line)
				if i%perFlush == perFlush-1 {
					for s := range sources {
						m.advance(s, t)
					}
					if err := m.flush(false); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := m.flush(true); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestMergerKeepsOrderWithinAndAcrossSources: equal times keep their
// arrival order, an event older than its source's last is still written
// in its place, and a source removed with events queued still has them
// written.
func TestMergerKeepsOrderWithinAndAcrossSources(t *testing.T) {
	var buf bytes.Buffer
	base := monoclock.Now() - 1_000_000_000
	m := newMerger(history.NewWriter(&buf), base)
	m.addSource(1)
	m.addSource(2)
	ev := func(ts int64, proc string) *history.Event {
		return &history.Event{T: ts, Type: history.OK, F: history.OpAcquire, Proc: proc, Key: "k"}
	}
	now := monoclock.Since(base)
	m.push(1, ev(now+10, "i1c1"))
	m.push(2, ev(now+10, "i1c2"))
	m.push(1, ev(now+30, "i1c3"))
	m.push(1, ev(now+20, "i1c4")) // out of order within source 1
	m.push(2, ev(now+30, "i1c5"))
	m.removeSource(2)
	m.advance(1, now+25)
	if err := m.flush(false); err != nil {
		t.Fatal(err)
	}
	m.removeSource(1)
	if err := m.flush(true); err != nil {
		t.Fatal(err)
	}
	r := history.NewReader(strings.NewReader(buf.String()), "merged")
	var got []string
	for r.Next() {
		got = append(got, r.Event().Proc)
	}
	if want := "i1c1 i1c2 i1c4 i1c3 i1c5"; strings.Join(got, " ") != want {
		t.Errorf("written in order %v, want %s", got, want)
	}
}

// TestHistoryIsBounded: past MaxHistoryBytes the merger writes nothing
// more and says why, whatever the workers send.
func TestHistoryIsBounded(t *testing.T) {
	old := MaxHistoryBytes
	MaxHistoryBytes = 1 << 20
	defer func() { MaxHistoryBytes = old }()
	var buf bytes.Buffer
	base := monoclock.Now() - 1_000_000_000
	m := newMerger(history.NewWriter(&buf), base)
	m.addSource(1)
	now := monoclock.Since(base)
	for i := int64(0); i < 20000; i++ {
		m.push(1, &history.Event{T: now + i, Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k"})
	}
	m.advance(1, now+30000)
	err := m.flush(true)
	if err == nil || !strings.Contains(err.Error(), "the history passed 1 MiB") {
		t.Errorf("flush: %v", err)
	}
	if n := int64(buf.Len()); n > MaxHistoryBytes {
		t.Errorf("%d bytes of history written past the bound of %d", n, MaxHistoryBytes)
	}
}
