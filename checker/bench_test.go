package checker_test

import (
	"fmt"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

// synthetic generates a safe history of n acquisitions over clients
// clients and keys keys, one event at a time into a reused Event, so that
// the benchmark measures the checker and not the generator's memory.
type synthetic struct {
	procs []string
	keys  []string
	ev    history.Event
}

func newSynthetic(clients, keys int) *synthetic {
	s := &synthetic{}
	for i := 0; i < clients; i++ {
		s.procs = append(s.procs, fmt.Sprintf("i%dc%d", i/4+1, i%4)) // instances from 1, as history.ParseProc reads them
	}
	for i := 0; i < keys; i++ {
		s.keys = append(s.keys, fmt.Sprintf("k%d", i))
	}
	return s
}

// feed runs n acquisitions through c: each is acquire invoke/ok, resource
// read/write, release invoke/ok (6 events). Holders of one key take turns,
// so the history is safe. It returns the number of events.
func (s *synthetic) feed(c *checker.Case, n int) int {
	t := int64(0)
	events := 0
	add := func(typ history.Type, f, proc, key string, tok uint64) {
		t++
		s.ev = history.Event{T: t, Type: typ, F: f, Proc: proc, Key: key, Token: tok}
		if typ == history.Mark {
			s.ev.Fenced = history.FencedAccepted
		}
		c.Add(&s.ev)
		events++
	}
	for i := 0; i < n; i++ {
		proc := s.procs[i%len(s.procs)]
		key := s.keys[i%len(s.keys)]
		tok := uint64(i + 1)
		add(history.Invoke, history.OpAcquire, proc, key, 0)
		add(history.OK, history.OpAcquire, proc, key, tok)
		add(history.Mark, history.MarkResRead, proc, key, tok)
		add(history.Mark, history.MarkResWrite, proc, key, tok)
		add(history.Invoke, history.OpRelease, proc, key, 0)
		add(history.OK, history.OpRelease, proc, key, 0)
	}
	return events
}

// BenchmarkMutualExclusion1M checks a synthetic history of 1,000,000
// acquisitions (6,000,000 events) per iteration and reports events/s.
func BenchmarkMutualExclusion1M(b *testing.B) {
	s := newSynthetic(64, 16)
	b.ReportAllocs()
	events := 0
	for b.Loop() {
		c := checker.NewCase(history.CaseMeta{Name: "bench"}, 0)
		events += s.feed(c, 1_000_000)
		c.Add(&history.Event{T: 1 << 62, Type: history.Mark, F: history.MarkCaseEnd})
		if r := c.Result(); r.Violations != 0 || r.AcquiresOK != 1_000_000 {
			b.Fatalf("violations=%d acquires=%d", r.Violations, r.AcquiresOK)
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// TestCheckerMemoryIsBounded: once every key and client has been seen, the
// checker allocates nothing per event, so its memory is bounded by the
// number of concurrent holders and not by the length of the history.
func TestCheckerMemoryIsBounded(t *testing.T) {
	s := newSynthetic(64, 16)
	c := checker.NewCase(history.CaseMeta{Name: "bounded"}, 0)
	s.feed(c, 10_000) // warm up: every key and client seen
	allocs := testing.AllocsPerRun(5, func() { s.feed(c, 10_000) })
	if allocs > 0 {
		t.Errorf("checking 10,000 more acquisitions allocated %v times; want 0", allocs)
	}
}
