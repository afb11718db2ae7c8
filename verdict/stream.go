package verdict

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
)

// LinTimeout bounds the porcupine check of one key.
var LinTimeout = 10 * time.Second

// ErrEmpty means a history holds no case at all.
var ErrEmpty = errors.New("history holds no case (no case-start mark)")

// ErrOutsideCase means an event came before the history's first
// case-start: it belongs to no case (MODEL §2), and the history is refused.
var ErrOutsideCase = errors.New("an event before the first case-start belongs to no case")

// AnalyzeFile checks the history at path. A tail journal next to it (the
// coordinator died holding events back) is merged in, with a warning.
func AnalyzeFile(path string) (*Summary, error) {
	f, n, err := history.OpenRecovered(path, filepath.Join(filepath.Dir(path), layout.TailFile))
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	sum, err := Analyze(history.NewReader(f, path))
	if sum != nil && n > 0 {
		sum.Warnings = append(sum.Warnings, fmt.Sprintf("%d event(s) recovered from %s: the coordinator stopped before it could write them in order", n, layout.TailFile))
	}
	return sum, err
}

// Analyze runs the checker and the metrics over a history, case by case, in
// one streaming pass. An event outside every case is refused with its line
// (before the first case) or makes the case it follows invalid (MODEL §2).
// Reading and judging run side by side: one goroutine decodes lines into
// batches of events while the caller's judges the batches before.
func Analyze(r *history.Reader) (*Summary, error) {
	st := NewStream()
	batches, free := make(chan *batch, 4), make(chan *batch, 6)
	for range cap(free) {
		free <- &batch{}
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(batches)
		for {
			var b *batch
			select {
			case b = <-free:
			case <-stop:
				return
			}
			b.events, b.lines, b.hashes = b.events[:0], b.lines[:0], b.hashes[:0]
			for len(b.events) < batchSize && r.Next() {
				b.events = append(b.events, *r.Event())
				b.lines = append(b.lines, r.Line())
				b.hashes = append(b.hashes, eventHash(r.Event()))
			}
			if len(b.events) == 0 {
				return
			}
			select {
			case batches <- b:
			case <-stop:
				return
			}
		}
	}()
	for b := range batches {
		for i := range b.events {
			if _, err := st.add(&b.events[i], b.hashes[i]); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", r.Name(), b.lines[i], err)
			}
		}
		free <- b
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	s := st.Summary()
	if t := r.Truncated(); t != "" {
		s.Warnings = append(s.Warnings, t)
	}
	if len(s.Cases) == 0 {
		return s, ErrEmpty
	}
	return s, nil
}

// batchSize is how many events the reading goroutine hands over at once.
const batchSize = 1024

// batch is a run of decoded events and their line numbers.
type batch struct {
	events []history.Event
	lines  []int
	hashes []uint64 // eventHash of each, for the cases' digests
}

// Stream judges a history as its events come: each case (each lane of a
// batch of side-by-side trials) as soon as its case-end mark arrives, so
// that a run can say a verdict the moment a case is over. Analyze is a
// Stream over a file.
type Stream struct {
	s      *Summary
	units  []*unit // the case in progress: one, or one per lane
	split  *laneSplit
	ended  bool  // its case-end came
	first  int   // index in s.Cases of its first unit, once ended
	dirty  bool  // events came after its end
	lastT  int64 // the last event's time, for the whole file's order
	inCase bool
}

// unit is the checker and timeline of one case, or of one lane of a batch
// of side-by-side trials.
type unit struct {
	chk *checker.Case
	tl  *timeliner
	dig digest
}

// add feeds the unit one event, h its eventHash.
func (u *unit) add(e *history.Event, h uint64) {
	u.chk.Add(e)
	u.dig = u.dig.add(h)
}

// NewStream returns an empty Stream.
func NewStream() *Stream { return &Stream{s: &Summary{SchemaVersion: SchemaVersion}} }

// Add feeds one event; at a case's end it returns the cases it finished.
// A case-start whose meta does not decode, and an event before the first
// case-start, are errors.
func (st *Stream) Add(e *history.Event) ([]CaseSummary, error) { return st.add(e, eventHash(e)) }

// add is Add with the event's eventHash h already computed.
func (st *Stream) add(e *history.Event, h uint64) ([]CaseSummary, error) {
	if e.Type == history.Mark && e.F == history.MarkCaseStart {
		done := st.close()
		meta, err := checker.MetaOf(e)
		if err != nil {
			return done, err
		}
		st.inCase, st.ended, st.dirty, st.lastT = true, false, false, e.T
		metas := []history.CaseMeta{meta}
		st.split = nil
		if meta.Lanes >= 1 { // MODEL §14: a batch of one lane is a lane too
			st.split = newLaneSplit(meta)
			metas = st.split.metas()
		}
		st.units = st.units[:0]
		for i, m := range metas {
			tl := newTimeliner(e.T)
			chk := checker.NewCase(m, e.T, checker.WithLinearizability(LinTimeout), checker.WithSink(tl.add))
			u := &unit{chk: chk, tl: tl, dig: newDigest(i).add(h)}
			st.units = append(st.units, u)
		}
		return done, nil
	}
	if !st.inCase {
		return nil, ErrOutsideCase
	}
	if st.ended {
		// MODEL §2: after the case's end, it belongs to no case; the case
		// it follows is invalid, judged again at the next case or the end.
		for _, u := range st.units {
			u.add(e, h)
		}
		st.dirty = true
		return nil, nil
	}
	if st.split == nil {
		st.units[0].add(e, h)
	} else {
		st.route(e, h)
	}
	if e.Type == history.Mark && e.F == history.MarkCaseEnd {
		st.ended = true
		st.first = len(st.s.Cases)
		return st.judge(), nil
	}
	return nil, nil
}

// route sends an event of a batch to its lanes (MODEL §14).
func (st *Stream) route(e *history.Event, h uint64) {
	if e.T < st.lastT {
		// The record's order is the whole file's: a lane whose own events
		// are in order is still part of a record that is not.
		for _, u := range st.units {
			u.chk.OutOfOrder()
		}
	} else {
		st.lastT = e.T
	}
	for _, d := range st.split.route(e) {
		u := st.units[d.lane]
		if d.stray != "" {
			u.chk.Stray(d.stray)
		}
		if d.event != nil {
			u.add(d.event, h) // a lane's copy is told apart by the lane
		}
	}
}

// judge judges the units of the case that just ended (or was cut short).
func (st *Stream) judge() []CaseSummary {
	var done []CaseSummary
	for _, u := range st.units {
		done = append(done, summarize(u))
	}
	st.s.Cases = append(st.s.Cases, done...)
	return done
}

func summarize(u *unit) CaseSummary {
	res := u.chk.Result()
	cs := CaseSummary{Check: res, Metrics: metricsOf(res, u.tl.close()), Linearizability: u.chk.Linearizability(res.Valid), Digest: u.dig.sum()}
	cs.evaluate()
	return cs
}

// close finishes the case in progress: one cut short is judged now; one
// that ended and then saw events after its end is judged again.
func (st *Stream) close() []CaseSummary {
	var done []CaseSummary
	switch {
	case st.inCase && !st.ended:
		done = st.judge()
	case st.ended && st.dirty:
		for i, u := range st.units {
			st.s.Cases[st.first+i] = summarize(u)
		}
	}
	st.units, st.split, st.inCase, st.ended, st.dirty = nil, nil, false, false, false
	return done
}

// Summary finishes what is still open (a history cut short) and returns
// every case with its rows.
func (st *Stream) Summary() *Summary {
	st.close()
	st.s.Rows = rows(st.s.Cases)
	return st.s
}
