package resource

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/history"
)

type recorder struct {
	mu  sync.Mutex
	evs []history.Event
}

func (r *recorder) emit(e *history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, *e)
}

func start(t *testing.T) (*Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	s, err := Listen(rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rec
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestFencingStopsStaleHolder replays Kleppmann's example: A reads with
// token 33, pauses; B acquires with 34, reads and writes; A's late write is
// a lost update on the unfenced register and is rejected on the fenced one.
func TestFencingStopsStaleHolder(t *testing.T) {
	s, rec := start(t)
	a, b := NewClient(s.Addr(), "A"), NewClient(s.Addr(), "B")
	defer a.Close()
	defer b.Close()
	ra, err := a.Read(ctx(t), "k", 33)
	if err != nil {
		t.Fatal(err)
	}
	if cs := s.InCriticalSection(); cs["A"] != "k" {
		t.Errorf("A should be in its critical section: %v", cs)
	}
	rb, err := b.Read(ctx(t), "k", 34)
	if err != nil {
		t.Fatal(err)
	}
	if wb, err := b.Write(ctx(t), "k", rb, 34); err != nil || wb.Lost || wb.Fenced != history.FencedAccepted {
		t.Fatalf("B's write: %+v %v", wb, err)
	}
	wa, err := a.Write(ctx(t), "k", ra, 33)
	if err != nil {
		t.Fatal(err)
	}
	if !wa.Lost || wa.Fenced != history.FencedRejected {
		t.Errorf("A's late write = %+v, want lost on unfenced and rejected on fenced", wa)
	}
	if u, f := s.Values("k"); u != 1 || f != 1 {
		t.Errorf("values u=%d f=%d, want 1 1 (A's write overwrote B's unfenced)", u, f)
	}
	if n := len(rec.evs); n != 4 {
		t.Errorf("emitted %d events, want 4", n)
	}
}

// TestFencedReadSeesNewerToken: once B has read with a higher token, A's
// write is refused even though B has not written yet.
func TestFencedReadSeesNewerToken(t *testing.T) {
	s, _ := start(t)
	a, b := NewClient(s.Addr(), "A"), NewClient(s.Addr(), "B")
	ra, _ := a.Read(ctx(t), "k", 5)
	if _, err := b.Read(ctx(t), "k", 6); err != nil {
		t.Fatal(err)
	}
	wa, _ := a.Write(ctx(t), "k", ra, 5)
	if wa.Fenced != history.FencedRejected || wa.Lost {
		t.Errorf("A's write = %+v, want rejected and not lost (nobody wrote in between)", wa)
	}
	rr, _ := a.Read(ctx(t), "k", 5)
	if rr.Fenced != -1 {
		t.Errorf("a stale read returns fenced=%d, want -1", rr.Fenced)
	}
}

// TestEqualTokenFromAnotherHolder: with no token (0) the fenced register
// cannot tell holders apart; it flags the reuse and lets the stale write in.
func TestEqualTokenFromAnotherHolder(t *testing.T) {
	s, rec := start(t)
	a, b := NewClient(s.Addr(), "A"), NewClient(s.Addr(), "B")
	ra, _ := a.Read(ctx(t), "k", 0)
	rb, _ := b.Read(ctx(t), "k", 0)
	b.Write(ctx(t), "k", rb, 0)
	wa, _ := a.Write(ctx(t), "k", ra, 0)
	if wa.Fenced != history.FencedStale || !wa.Lost {
		t.Errorf("A's write = %+v, want stale accepted and lost", wa)
	}
	reuse := 0
	for _, e := range rec.evs {
		if e.Reuse {
			reuse++
		}
	}
	if reuse != 2 {
		t.Errorf("reuse flagged %d times, want 2 (B's read after A's, A's write after B's)", reuse)
	}
}

func TestBadRequests(t *testing.T) {
	s, _ := start(t)
	for _, req := range [][]string{{}, {"R", "k"}, {"R", "k", "x", "p"}, {"W", "k", "1", "2", "y", "p"}, {"X"}} {
		if _, err := s.handle(req); err == nil {
			t.Errorf("request %q accepted", req)
		}
	}
}

func TestAbandonLeavesTheCriticalSection(t *testing.T) {
	s, _ := start(t)
	a := NewClient(s.Addr(), "A")
	defer a.Close()
	if _, err := a.Read(ctx(t), "k", 1); err != nil {
		t.Fatal(err)
	}
	if s.InCriticalSection()["A"] != "k" {
		t.Fatal("A should be in its critical section after reading")
	}
	if err := a.Abandon(ctx(t), "k"); err != nil {
		t.Fatal(err)
	}
	if _, in := s.InCriticalSection()["A"]; in {
		t.Error("A is still counted as a holder after abandoning its work")
	}
}
