package resource

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
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
	s, err := Listen("127.0.0.1", "", rec.emit)
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
	a, b := NewClient(s.Addr(), "A", nil), NewClient(s.Addr(), "B", nil)
	defer a.Close()
	defer b.Close()
	_, err := a.Read(ctx(t), "k", 33)
	if err != nil {
		t.Fatal(err)
	}
	if cs := s.InCriticalSection(); cs["A"] != "k" {
		t.Errorf("A should be in its critical section: %v", cs)
	}
	_, err = b.Read(ctx(t), "k", 34)
	if err != nil {
		t.Fatal(err)
	}
	if wb, err := b.Write(ctx(t), "k", 34); err != nil || wb.Lost || wb.Fenced != history.FencedAccepted {
		t.Fatalf("B's write: %+v %v", wb, err)
	}
	wa, err := a.Write(ctx(t), "k", 33)
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
	a, b := NewClient(s.Addr(), "A", nil), NewClient(s.Addr(), "B", nil)
	a.Read(ctx(t), "k", 5)
	if _, err := b.Read(ctx(t), "k", 6); err != nil {
		t.Fatal(err)
	}
	wa, _ := a.Write(ctx(t), "k", 5)
	if wa.Fenced != history.FencedRejected || wa.Lost {
		t.Errorf("A's write = %+v, want rejected and not lost (nobody wrote in between)", wa)
	}
	rr, _ := a.Read(ctx(t), "k", 5)
	if rr.Fenced != -1 {
		t.Errorf("a stale read returns fenced=%d, want -1", rr.Fenced)
	}
}

// TestEqualTokenFromAnotherHolder: a token equal to another holder's
// cannot tell them apart; the resource flags the reuse and lets the stale
// write in. Token 0 means the backend has no tokens: the stale write gets
// in too, but that is no reuse to report.
func TestEqualTokenFromAnotherHolder(t *testing.T) {
	for _, tt := range []struct {
		token uint64
		reuse int
	}{{7, 2}, {0, 0}} {
		s, rec := start(t)
		a, b := NewClient(s.Addr(), "A", nil), NewClient(s.Addr(), "B", nil)
		a.Read(ctx(t), "k", tt.token)
		b.Read(ctx(t), "k", tt.token)
		b.Write(ctx(t), "k", tt.token)
		wa, _ := a.Write(ctx(t), "k", tt.token)
		if wa.Fenced != history.FencedStale || !wa.Lost {
			t.Errorf("token %d: A's write = %+v, want stale accepted and lost", tt.token, wa)
		}
		reuse := 0
		for _, e := range rec.evs {
			if e.Reuse {
				reuse++
			}
		}
		if reuse != tt.reuse {
			t.Errorf("token %d: reuse flagged %d times, want %d", tt.token, reuse, tt.reuse)
		}
	}
}

// TestReadWriteInOneRoundTrip: a pipelined read and write behave as a read
// followed by a write.
func TestReadWriteInOneRoundTrip(t *testing.T) {
	s, rec := start(t)
	a := NewClient(s.Addr(), "A", nil)
	defer a.Close()
	for i := 0; i < 3; i++ {
		rr, wr, err := a.ReadWrite(ctx(t), "k", uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if rr.Unfenced != int64(i) || wr.Lost || wr.Fenced != history.FencedAccepted {
			t.Fatalf("round %d: %+v %+v", i, rr, wr)
		}
	}
	if u, f := s.Values("k"); u != 3 || f != 3 || len(rec.evs) != 6 {
		t.Errorf("values %d %d, %d events; want 3 3 and 6", u, f, len(rec.evs))
	}
	if _, in := s.InCriticalSection()["A"]; in {
		t.Error("A still counted inside its critical section")
	}
}

// TestLateRequestIsFlagged: a request that arrives after its client's
// deadline is applied but marked late.
func TestLateRequestIsFlagged(t *testing.T) {
	s, rec := start(t)
	if _, err := s.handle(nil, []byte("R k 1 A 1\n")); err != nil {
		t.Fatal(err)
	}
	if !rec.evs[0].Late {
		t.Error("a read past its deadline is not flagged late")
	}
	a := NewClient(s.Addr(), "B", nil)
	defer a.Close()
	if _, err := a.Read(ctx(t), "k", 2); err != nil || rec.evs[1].Late {
		t.Errorf("a read in time is flagged late (%v)", err)
	}
}

func TestBadRequests(t *testing.T) {
	s, _ := start(t)
	for _, req := range []string{"", "R k", "R k x p 1", "W k 1 p y", "W k 1 never-read 1", "X", "R k 1 p 1 extra"} {
		if _, err := s.handle(nil, []byte(req+"\n")); err == nil {
			t.Errorf("request %q accepted", req)
		}
	}
}

func TestAbandonLeavesTheCriticalSection(t *testing.T) {
	s, _ := start(t)
	a := NewClient(s.Addr(), "A", nil)
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

// TestManyClientsShareOneConnection: the clients of an instance share one
// connection; their concurrent requests are answered in order, each to its
// caller, and a caller that gives up does not take another's reply.
func TestManyClientsShareOneConnection(t *testing.T) {
	s, rec := start(t)
	m := NewMux(s.Addr(), nil)
	defer m.Close()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		c := m.Client(fmt.Sprintf("c%d", i))
		key := fmt.Sprintf("k%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				rr, wr, err := c.ReadWrite(ctx(t), key, uint64(j+1))
				if err != nil || rr.Unfenced != int64(j) || wr.Fenced != history.FencedAccepted {
					t.Errorf("%s round %d: %+v %+v %v", key, j, rr, wr, err)
					return
				}
			}
		}()
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Client("late").Read(gone, "kx", 1); err == nil {
		t.Error("a cancelled request succeeded")
	}
	wg.Wait()
	if n := len(rec.evs); n < 2000 {
		t.Errorf("%d events, want 2000", n)
	}
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	if conns != 1 {
		t.Errorf("%d connections, want 1", conns)
	}
}

// countingConn counts the writes a Mux makes.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestMuxBatchesAndNeverStrands: busy clients' requests go out together,
// one batch on the wire at a time (fewer writes than requests), and none
// is left waiting in the queue when the batch before it is answered
// before its writer returns: every call is answered within its timeout.
func TestMuxBatchesAndNeverStrands(t *testing.T) {
	s, _ := start(t)
	var writes atomic.Int64
	var d net.Dialer
	m := NewMux(s.Addr(), func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	})
	defer m.Close()
	const clients, rounds = 8, 500
	var wg sync.WaitGroup
	for i := range clients {
		c := m.Client(fmt.Sprintf("c%d", i))
		key := fmt.Sprintf("k%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range rounds {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _, err := c.ReadWrite(cctx, key, uint64(j+1))
				cancel()
				if err != nil {
					t.Errorf("%s round %d: %v", key, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if w := writes.Load(); w > clients*rounds*3/4 {
		t.Errorf("%d writes for %d requests: the busy clients' requests were not batched", w, clients*rounds)
	}
	t.Logf("%d writes for %d requests", writes.Load(), clients*rounds)
}

// BenchmarkResourceReadWrite is a critical section with no hold as the
// harness runs it: 64 clients of one instance sharing its Mux, each doing
// a read-and-write round trip on a key of its own against a real server
// on loopback. One op is one critical section.
func BenchmarkResourceReadWrite(b *testing.B) {
	s, err := Listen("127.0.0.1", "", func(*history.Event) {})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := NewMux(s.Addr(), nil)
	defer m.Close()
	const clients = 64
	var next sync.WaitGroup
	var n = make(chan struct{}, b.N)
	for range b.N {
		n <- struct{}{}
	}
	close(n)
	b.ReportAllocs()
	b.ResetTimer()
	for c := range clients {
		next.Add(1)
		go func() {
			defer next.Done()
			cl := m.Client(fmt.Sprintf("i1c%d", c))
			key := fmt.Sprintf("k%d", c)
			for tok := uint64(1); ; tok++ {
				if _, ok := <-n; !ok {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _, err := cl.ReadWrite(ctx, key, tok)
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	next.Wait()
}

// TestChecks runs the same requests through both fencing checks: the
// older holder's lower token (Kleppmann's pause), a token regression (the
// counter went back: the new holder presents a lower token, then the old
// holder writes) and a reuse of the same token by another holder.
func TestChecks(t *testing.T) {
	type step struct {
		op, proc string
		token    uint64
		want     string // the fenced verdict
	}
	const acc, rej, stale = history.FencedAccepted, history.FencedRejected, history.FencedStale
	for _, tt := range []struct {
		name  string
		check Check
		steps []step
	}{
		{"pause/at-least", CheckAtLeast, []step{{"R", "A", 33, acc}, {"R", "B", 34, acc}, {"W", "B", 34, acc}, {"W", "A", 33, rej}}},
		{"pause/greater", CheckGreater, []step{{"R", "A", 33, acc}, {"R", "B", 34, acc}, {"W", "B", 34, acc}, {"W", "A", 33, rej}}},
		{"pause/not-equal", CheckNotEqual, []step{{"R", "A", 33, acc}, {"R", "B", 34, acc}, {"W", "B", 34, acc}, {"W", "A", 33, stale}}},
		{"regression/at-least", CheckAtLeast, []step{{"R", "A", 10, acc}, {"R", "B", 4, rej}, {"W", "B", 4, rej}, {"W", "A", 10, acc}}},
		{"regression/greater", CheckGreater, []step{{"R", "A", 10, acc}, {"R", "B", 4, rej}, {"W", "B", 4, rej}, {"W", "A", 10, acc}}},
		{"regression/not-equal", CheckNotEqual, []step{{"R", "A", 10, acc}, {"R", "B", 4, acc}, {"W", "B", 4, acc}, {"W", "A", 10, stale}}},
		{"reuse/at-least", CheckAtLeast, []step{{"R", "A", 7, acc}, {"R", "B", 7, acc}, {"W", "B", 7, acc}, {"W", "A", 7, stale}}},
		{"reuse/greater", CheckGreater, []step{{"R", "A", 7, acc}, {"R", "B", 7, rej}, {"W", "B", 7, rej}, {"W", "A", 7, acc}}},
		{"own token again/greater", CheckGreater, []step{{"R", "A", 7, acc}, {"W", "A", 7, acc}, {"R", "A", 7, acc}, {"W", "A", 7, acc}}},
		{"no tokens/greater", CheckGreater, []step{{"R", "A", 0, acc}, {"R", "B", 0, acc}, {"W", "B", 0, acc}, {"W", "A", 0, stale}}},
		{"reuse/not-equal", CheckNotEqual, []step{{"R", "A", 7, acc}, {"R", "B", 7, rej}, {"W", "B", 7, rej}, {"W", "A", 7, acc}}},
		{"no tokens/not-equal", CheckNotEqual, []step{{"R", "A", 0, acc}, {"R", "B", 0, acc}, {"W", "B", 0, acc}, {"W", "A", 0, stale}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Listen("127.0.0.1", tt.check, func(*history.Event) {})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, st := range tt.steps {
				var got string
				if st.op == "R" {
					_, _, got, _ = s.read("k", st.token, st.proc)
				} else {
					_, got, _, err = s.write("k", st.token, st.proc)
					if err != nil {
						t.Fatal(err)
					}
				}
				if got != st.want {
					t.Errorf("step %d (%s %s token %d) = %s, want %s", i, st.op, st.proc, st.token, got, st.want)
				}
			}
		})
	}
	if _, err := Listen("127.0.0.1", "bigger", func(*history.Event) {}); err == nil {
		t.Error("an unknown check was accepted")
	}
}
