package runner

import (
	"container/heap"
	"sync"

	"github.com/lockbench/lockbench/internal/history"
	"github.com/lockbench/lockbench/internal/monoclock"
)

// merger orders the events of many sources into one history. Each worker's
// stream is already in time order (see package worker), so a k-way merge
// with a watermark suffices: an event is written once every live source has
// reported a time at or past it. A paused worker holds the watermark back
// (its buffered events could be older than anyone else's); a worker whose
// stream ends is dropped from the watermark. The coordinator's own events
// are timestamped under the merger's lock, so "now" is always a valid
// watermark for them.
type merger struct {
	mu      sync.Mutex
	base    int64
	w       *history.Writer
	last    map[int]int64 // source id -> latest time reported
	pending eventHeap
	seq     int64
	err     error
	onEvent func(*history.Event) // sees every event as it is written
}

func newMerger(w *history.Writer, base int64) *merger {
	return &merger{w: w, base: base, last: map[int]int64{}}
}

// addSource registers a source whose events will come with push.
func (m *merger) addSource(id int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last[id] = monoclock.Since(m.base)
}

// removeSource drops a source whose stream has ended.
func (m *merger) removeSource(id int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, id)
}

// push adds an event of source id; a tick only advances the source's time.
func (m *merger) push(id int, e *history.Event, tick bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.T > m.last[id] {
		m.last[id] = e.T
	}
	if !tick {
		m.seq++
		heap.Push(&m.pending, item{e: *e, seq: m.seq})
	}
}

// emit timestamps and adds a coordinator event now.
func (m *merger) emit(e history.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.T = monoclock.Since(m.base)
	m.seq++
	heap.Push(&m.pending, item{e: e, seq: m.seq})
}

// flush writes every event at or before the watermark and flushes the file.
// With all=true it writes everything (no source can send more).
func (m *merger) flush(all bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	wm := monoclock.Since(m.base)
	for _, t := range m.last {
		if t < wm {
			wm = t
		}
	}
	for m.pending.Len() > 0 && (all || m.pending[0].e.T <= wm) {
		it := heap.Pop(&m.pending).(item)
		if m.onEvent != nil {
			m.onEvent(&it.e)
		}
		if err := m.w.Write(&it.e); err != nil && m.err == nil {
			m.err = err
		}
	}
	if err := m.w.Flush(); err != nil && m.err == nil {
		m.err = err
	}
	return m.err
}

type item struct {
	e   history.Event
	seq int64 // arrival order breaks ties, keeping a source's order
}

type eventHeap []item

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].e.T != h[j].e.T {
		return h[i].e.T < h[j].e.T
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(item)) }
func (h *eventHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
