package verdict

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
)

// genHistory is an io.Reader that produces a safe history of n events (as
// bench check would read from history.jsonl), generated as it is read:
// clients take turns on keys, each acquisition six events.
type genHistory struct {
	n, sent int
	buf     []byte
	t       int64
	i       int
	clients []string
	keys    []string
}

func newGenHistory(n, clients, keys int) *genHistory {
	g := &genHistory{n: n}
	for c := 0; c < clients; c++ {
		g.clients = append(g.clients, fmt.Sprintf("i%dc%d", c/8+1, c%8))
	}
	for k := 0; k < keys; k++ {
		g.keys = append(g.keys, fmt.Sprintf("k%d", k))
	}
	meta, _ := json.Marshal(history.CaseMeta{Name: "gen", Backend: "redis", Fenced: true, Clients: clients, Keys: keys, LeaseNs: int64(2 * time.Second),
		Duration: int64(n) * 1000})
	g.emit(&history.Event{Type: history.Mark, F: history.MarkCaseStart, Meta: meta})
	return g
}

func (g *genHistory) emit(e *history.Event) {
	g.t += 1000
	e.T = g.t
	g.buf = append(history.AppendJSON(g.buf, e), '\n')
	g.sent++
}

func (g *genHistory) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.sent < g.n {
		if g.sent+7 >= g.n {
			g.t = max(g.t, int64(g.n)*1000)
			g.emit(&history.Event{Type: history.Mark, F: history.MarkCaseStop})
			g.emit(&history.Event{Type: history.Mark, F: history.MarkCaseEnd})
			g.n = g.sent
			break
		}
		proc, key := g.clients[g.i%len(g.clients)], g.keys[g.i%len(g.keys)]
		tok := uint64(g.i + 1)
		g.emit(&history.Event{Type: history.Invoke, F: history.OpAcquire, Proc: proc, Key: key})
		g.emit(&history.Event{Type: history.OK, F: history.OpAcquire, Proc: proc, Key: key, Token: tok})
		g.emit(&history.Event{Type: history.Mark, F: history.MarkResRead, Proc: proc, Key: key, Token: tok, Fenced: history.FencedAccepted})
		g.emit(&history.Event{Type: history.Mark, F: history.MarkResWrite, Proc: proc, Key: key, Token: tok, Fenced: history.FencedAccepted})
		g.emit(&history.Event{Type: history.Invoke, F: history.OpRelease, Proc: proc, Key: key})
		g.emit(&history.Event{Type: history.OK, F: history.OpRelease, Proc: proc, Key: key})
		g.i++
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf)
	g.buf = g.buf[:copy(g.buf, g.buf[n:])]
	return n, nil
}

// BenchmarkCheck10M runs bench check's analysis (parse, mutual exclusion,
// metrics, windowed linearizability) over a generated history of ten
// million events, and reports events per second and the peak heap: the
// analysis streams, so memory does not grow with the history.
func BenchmarkCheck10M(b *testing.B) { benchCheck(b, 10_000_000, 64, 1000) }

// BenchmarkCheck3M20k is issue 28's figure (make perf): bench check's
// analysis over a generated history of three million events on twenty
// thousand keys, with its linearizability verdict; the target is 2M
// events/s in at most 400 MB.
func BenchmarkCheck3M20k(b *testing.B) { benchCheck(b, 3_000_000, 64, 20000) }

// benchCheck analyses a generated history of events over clients and
// keys, and reports events per second, the time, the peak heap in use and
// the most memory the Go runtime held from the system (what the process's
// resident size is bounded by).
func benchCheck(b *testing.B, events, clients, keys int) {
	for i := 0; i < b.N; i++ {
		var peak, sys uint64
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				peak, sys = max(peak, ms.HeapInuse), max(sys, ms.Sys)
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		sum, err := Analyze(history.NewReader(newGenHistory(events, clients, keys), "gen"))
		elapsed := time.Since(start)
		close(done)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		c := sum.Cases[0]
		if c.Check.Status != "ok" || c.Linearizability.Verdict != "ok" || c.Metrics.Acquisitions < events/6-1 {
			b.Fatalf("status %s, linearizability %s, %d acquisitions", c.Check.Status, c.Linearizability.Verdict, c.Metrics.Acquisitions)
		}
		b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
		b.ReportMetric(elapsed.Seconds(), "s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		b.ReportMetric(float64(sys)/(1<<20), "sys-MB")
	}
}
