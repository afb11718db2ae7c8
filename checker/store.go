package checker

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/lockbench/lockbench/history"
)

// Store is the verdict on a critical section run in the backend's own
// database (history.OpStore): each key's counter, read once every client
// had stopped, against the increments the history says were committed. An
// increment is committed when its store operation wrote and the release
// after it succeeded (a compare-and-set commits at once; its release is a
// no-op). A counter below the committed increments lost updates; one above
// committed plus unknown ones applied writes nobody committed.
type Store struct {
	Verdict   Verdict `json:"verdict"`
	Committed int     `json:"committed"`
	// Conflicts are compare-and-sets that found the data changed (each
	// followed by a retry); CutShort work aborted before its write;
	// RolledBack writes whose release (commit) was refused.
	Conflicts  int `json:"conflicts"`
	CutShort   int `json:"cut_short"`
	RolledBack int `json:"rolled_back"`
	Unknown    int `json:"unknown"`
	// Lost increments were committed but are missing from the counters;
	// Phantom increments are in the counters but were never committed.
	Lost    int `json:"lost"`
	Phantom int `json:"phantom"`
	Keys    int `json:"keys"`
}

// storeCheck follows store operations through to their commit.
type storeCheck struct {
	on        bool
	pending   map[string]string // proc -> key written, awaiting its release
	committed map[string]int
	unknown   map[string]int
	totals    map[string]int64
	totalsErr string
	read      bool
	res       Store
}

func (s *storeCheck) init(meta history.CaseMeta) {
	s.on = meta.Store
	s.pending, s.committed, s.unknown = map[string]string{}, map[string]int{}, map[string]int{}
}

// add handles store operations and the release outcomes that commit them.
func (s *storeCheck) add(e *history.Event) {
	if !s.on {
		return
	}
	switch {
	case e.F == history.OpStore && e.Type == history.OK:
		s.pending[e.Proc] = e.Key
	case e.F == history.OpStore && e.Type == history.Fail:
		if e.Err == history.StoreConflict {
			s.res.Conflicts++
		} else {
			s.res.CutShort++
		}
	case e.F == history.OpStore && e.Type == history.Info:
		s.unknown[e.Key]++
		s.res.Unknown++
	case e.F == history.OpRelease && e.Type != history.Invoke:
		key, ok := s.pending[e.Proc]
		if !ok {
			return
		}
		delete(s.pending, e.Proc)
		switch e.Type {
		case history.OK:
			s.committed[key]++
			s.res.Committed++
		case history.Fail:
			s.res.RolledBack++
		case history.Unsent:
			// MODEL §9: the release never reached the database, so it
			// committed nothing; nor did the database refuse anything.
		default:
			s.unknown[key]++
			s.res.Unknown++
		}
	case e.Type == history.Mark && e.F == history.MarkStoreTotals:
		s.read = true
		if e.Err != "" {
			s.totalsErr = e.Err
			return
		}
		if err := json.Unmarshal(e.Meta, &s.totals); err != nil {
			s.totalsErr = fmt.Sprintf("store totals: %v", err)
		}
	}
}

// unknownWrite counts a store operation whose outcome is unknown (in
// flight when its client died).
func (s *storeCheck) unknownWrite(key string) {
	if !s.on {
		return
	}
	s.unknown[key]++
	s.res.Unknown++
}

// dropClient makes the pending write of a dead client unknown: its commit
// may or may not have happened.
func (s *storeCheck) dropClient(proc string) {
	if key, ok := s.pending[proc]; ok {
		delete(s.pending, proc)
		s.unknown[key]++
		s.res.Unknown++
	}
}

// result compares the totals with the commits; invalid says why the
// store could not be judged.
func (s *storeCheck) result() (res *Store, invalid string) {
	if !s.on {
		return nil, ""
	}
	r := s.res
	for _, key := range s.pending { // wrote, never released: uncommitted or unknown
		s.unknown[key]++
		r.Unknown++
	}
	switch {
	case !s.read:
		r.Verdict = Unknown
		return &r, "the store's totals were never read: whether updates were lost cannot be told"
	case s.totalsErr != "":
		r.Verdict = Unknown
		return &r, s.totalsErr
	}
	keys := map[string]bool{}
	for k := range s.committed {
		keys[k] = true
	}
	for k := range s.totals {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	r.Keys = len(names)
	for _, k := range names {
		final, c, u := int(s.totals[k]), s.committed[k], s.unknown[k]
		if final < c {
			r.Lost += c - final
		}
		if final > c+u {
			r.Phantom += final - c - u
		}
	}
	r.Verdict = Ok
	if r.Lost > 0 || r.Phantom > 0 {
		r.Verdict = Violation
	}
	return &r, ""
}
