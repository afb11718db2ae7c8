package runner

import (
	"container/heap"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/monoclock"
)

// merger orders the events of many sources into one history. Each worker's
// stream is already in time order (see package worker), so a k-way merge
// with a watermark suffices: an event is written once every live source has
// reported a time at or past it. A paused worker holds the watermark back
// (its buffered events could be older than anyone else's); a worker whose
// stream ends is dropped from the watermark. The coordinator's own events
// are timestamped under the merger's lock, so "now" is always a valid
// watermark for them; an event that must carry an earlier instant (the
// moment a fault was applied, known only once it was) reserves that instant
// first with addSource, which holds the watermark there until the event is
// pushed and the reservation removed.
//
// What the watermark holds back is lost if the coordinator dies by SIGKILL.
// To bound that loss, every flush appends the events received since the
// previous one to a tail journal next to the history; `bench check` merges
// the journal's events newer than the history's last back in. The journal
// is rewritten with only the held-back events when it grows, and removed
// when the run ends normally. A coordinator killed outright therefore loses
// at most the events of one flush interval.
type merger struct {
	mu      sync.Mutex
	base    int64
	w       *history.Writer
	last    map[int]int64  // source id -> latest time reported
	queues  map[int]*queue // source id -> its events not yet written
	heads   sourceHeap     // scratch: the queues ordered by their first event
	npend   int            // events queued, over every source
	seq     int64
	err     error
	written int64  // bytes of history written
	arena   []byte // encoded events are copied here, in large chunks
	scratch []byte // the coordinator's events are encoded here first

	tail      *os.File // the tail journal ("" path: none)
	tailPath  string
	tailBuf   *history.Writer
	fresh     [][]byte // lines received since the last flush
	tailLines int
}

// MaxHistoryBytes bounds the history a run writes (a variable for the
// tests): past it, nothing more is written and the run fails saying so,
// rather than filling the disk.
var MaxHistoryBytes int64 = 4 << 30

func newMerger(w *history.Writer, base int64) *merger {
	return &merger{w: w, base: base, last: map[int]int64{}, queues: map[int]*queue{}}
}

// journal starts the tail journal at path.
func (m *merger) journal(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create tail journal: %w", err)
	}
	m.tail, m.tailPath, m.tailBuf = f, path, history.NewWriter(f)
	return nil
}

// addSource registers a source whose events will come with push, and
// returns the time from which it holds the watermark.
func (m *merger) addSource(id int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := monoclock.Since(m.base)
	m.last[id] = t
	return t
}

// removeSource drops a source whose stream has ended.
func (m *merger) removeSource(id int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, id)
}

// advance records that source id has reported time t (a tick, or an event
// not written to the history).
func (m *merger) advance(id int, t int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t > m.last[id] {
		m.last[id] = t
	}
}

// pushLine adds an event of source id at time t, already encoded as line
// (without its newline), as the worker sent it: it is written as is.
func (m *merger) pushLine(id int, t int64, line []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t > m.last[id] {
		m.last[id] = t
	}
	m.add(id, t, line)
}

// push adds an event of source id.
func (m *merger) push(id int, e *history.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.T > m.last[id] {
		m.last[id] = e.T
	}
	m.scratch = history.AppendJSON(m.scratch[:0], e)
	m.add(id, e.T, m.scratch)
}

// add queues an encoded event of source id; line is copied.
func (m *merger) add(id int, t int64, line []byte) {
	n := len(line) + 1
	if cap(m.arena)-len(m.arena) < n {
		m.arena = make([]byte, 0, max(256<<10, n))
	}
	start := len(m.arena)
	m.arena = append(append(m.arena, line...), '\n')
	raw := m.arena[start:len(m.arena):len(m.arena)]
	m.seq++
	q := m.queues[id]
	if q == nil {
		q = &queue{}
		m.queues[id] = q
	}
	q.push(item{t: t, raw: raw, seq: m.seq})
	m.npend++
	if m.tail != nil {
		m.fresh = append(m.fresh, raw)
	}
}

// emit timestamps and adds a coordinator event now.
func (m *merger) emit(e history.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.T = monoclock.Since(m.base)
	m.scratch = history.AppendJSON(m.scratch[:0], &e)
	m.add(coordinatorSource, e.T, m.scratch)
}

// flush writes every event at or before the watermark and flushes the file.
// With all=true it writes everything (no source can send more).
func (m *merger) flush(all bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.journalFresh()
	wm := monoclock.Since(m.base)
	for _, t := range m.last {
		if t < wm {
			wm = t
		}
	}
	// A k-way merge of the sources' queues, each in time order: the cost
	// per event is a comparison among the k sources, not among every
	// event held back.
	m.heads = m.heads[:0]
	for id, q := range m.queues {
		if q.len() == 0 {
			if _, live := m.last[id]; !live && id != coordinatorSource {
				delete(m.queues, id)
			}
			continue
		}
		m.heads = append(m.heads, q)
	}
	heap.Init(&m.heads)
	for len(m.heads) > 0 {
		q := m.heads[0]
		it := q.items[q.head]
		if !all && it.t > wm {
			break
		}
		if m.written += int64(len(it.raw)); m.written > MaxHistoryBytes {
			if m.err == nil {
				m.err = fmt.Errorf("the history passed %d MiB: the rest is not written (a workload or a driver writing without bound)", MaxHistoryBytes>>20)
			}
		} else if err := m.w.WriteLine(it.raw); err != nil && m.err == nil {
			m.err = err
		}
		q.pop()
		m.npend--
		if q.len() == 0 {
			heap.Pop(&m.heads)
		} else {
			heap.Fix(&m.heads, 0)
		}
	}
	if err := m.w.Flush(); err != nil && m.err == nil {
		m.err = err
	}
	m.compactJournal()
	return m.err
}

// journalFresh appends the events received since the last flush to the
// tail journal.
func (m *merger) journalFresh() {
	if m.tail == nil || len(m.fresh) == 0 {
		return
	}
	for _, line := range m.fresh {
		if err := m.tailBuf.WriteLine(line); err != nil && m.err == nil {
			m.err = err
		}
	}
	m.tailLines += len(m.fresh)
	m.fresh = m.fresh[:0]
	if err := m.tailBuf.Flush(); err != nil && m.err == nil {
		m.err = fmt.Errorf("tail journal: %w", err)
	}
}

// compactJournal rewrites the journal with only the held-back events once
// it holds many more lines than those.
func (m *merger) compactJournal() {
	if m.tail == nil || m.tailLines <= 2*m.npend+10000 {
		return
	}
	tmp := m.tailPath + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return // the journal keeps growing; a later flush tries again
	}
	w := history.NewWriter(f)
	for _, q := range m.queues {
		for _, it := range q.items[q.head:] {
			if err := w.WriteLine(it.raw); err != nil {
				f.Close()
				os.Remove(tmp)
				return
			}
		}
	}
	if w.Flush() != nil || os.Rename(tmp, m.tailPath) != nil {
		f.Close()
		os.Remove(tmp)
		return
	}
	m.tail.Close()
	m.tail, m.tailBuf, m.tailLines = f, history.NewWriter(f), m.npend
}

// closeJournal removes the tail journal: the history is complete.
func (m *merger) closeJournal() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tail == nil {
		return nil
	}
	m.tail.Close()
	m.tail = nil
	if err := os.Remove(m.tailPath); err != nil {
		return fmt.Errorf("remove tail journal: %w", err)
	}
	return nil
}

// coordinatorSource is the source of the coordinator's own events, which
// are timestamped under the merger's lock and so arrive in time order.
const coordinatorSource = math.MinInt

type item struct {
	t   int64
	raw []byte // the encoded event and its newline
	seq int64  // arrival order breaks ties, keeping a source's order
}

func (a item) before(b item) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// queue holds one source's events not yet written, in time order. A
// source's events arrive in time order (a worker's stream is ordered, the
// coordinator stamps its own under the lock), so push appends; an event
// older than the last queued one, which no source sends today, is still
// put in its place.
type queue struct {
	items []item
	head  int
}

func (q *queue) len() int { return len(q.items) - q.head }

func (q *queue) push(it item) {
	n := len(q.items)
	if n == q.head || !it.before(q.items[n-1]) {
		if q.head > 0 && n == cap(q.items) && q.head >= n/2 {
			// Reuse the consumed front instead of growing.
			n = copy(q.items, q.items[q.head:])
			clear(q.items[n:])
			q.items, q.head = q.items[:n], 0
		}
		q.items = append(q.items, it)
		return
	}
	i := q.head + sort.Search(n-q.head, func(i int) bool { return it.before(q.items[q.head+i]) })
	q.items = append(q.items, item{})
	copy(q.items[i+1:], q.items[i:])
	q.items[i] = it
}

func (q *queue) pop() {
	q.items[q.head] = item{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

// sourceHeap orders non-empty queues by their first event.
type sourceHeap []*queue

func (h sourceHeap) Len() int           { return len(h) }
func (h sourceHeap) Less(i, j int) bool { return h[i].items[h[i].head].before(h[j].items[h[j].head]) }
func (h sourceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sourceHeap) Push(x any)        { *h = append(*h, x.(*queue)) }
func (h *sourceHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}
