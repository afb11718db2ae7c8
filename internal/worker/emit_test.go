package worker

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/monoclock"
)

// BenchmarkEmit is a client's cost of recording one event: timestamped,
// encoded and queued under the emitter's lock while the flusher writes
// batches out, with every client of the instance emitting at once.
func BenchmarkEmit(b *testing.B) {
	em := newEmitter(io.Discard, monoclock.Now())
	e := history.Event{Type: history.OK, F: history.OpAcquire, Proc: "i1c12", Key: "k12", Token: 7}
	b.ReportAllocs()
	b.SetParallelism(32) // 64 clients on this 2-core machine
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			em.emit(e)
		}
	})
	b.StopTimer()
	if err := em.close(); err != nil {
		b.Fatal(err)
	}
}

// TestEmitterWritesInTimeOrder: events emitted by many clients at once
// all come out, each stamped, in non-decreasing time order, after close.
func TestEmitterWritesInTimeOrder(t *testing.T) {
	var out bytes.Buffer
	em := newEmitter(&out, monoclock.Now())
	const clients, each = 16, 2000
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				em.emit(history.Event{Type: history.Invoke, F: history.OpAcquire, Proc: fmt.Sprintf("i1c%d", c), Key: "k"})
			}
		}()
	}
	wg.Wait()
	if err := em.close(); err != nil {
		t.Fatal(err)
	}
	r := history.NewReader(&out, "emitted")
	n, last := 0, int64(0)
	for r.Next() {
		e := r.Event()
		if e.T < last || e.T <= 0 {
			t.Fatalf("event %d at %d after one at %d", n, e.T, last)
		}
		last = e.T
		n++
	}
	if r.Err() != nil || n != clients*each {
		t.Fatalf("read %d events (%v), want %d", n, r.Err(), clients*each)
	}
}
