package worker

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/monoclock"
)

// syncBuffer is a buffer the emitter's flusher and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGates: a client passing a phase no arm waits for goes on; the first
// client to reach an armed phase takes the arm, says so at once and waits
// until it is released; a second client at that phase goes on (the arm is
// taken); a disarm releases a client that took it meanwhile.
func TestGates(t *testing.T) {
	var out syncBuffer
	em := newEmitter(&out, monoclock.Now())
	defer em.close()
	g := newGates(em)
	ctx := context.Background()
	quick := func(name string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatalf("%s: the client waited", name)
		}
	}
	quick("no arm", func() { g.at(ctx, history.PhaseBefore, "i1c0", "j1", 1) })
	if !g.command("arm f#1 during-effect") || g.command("hello") {
		t.Fatal("commands: arm not taken, or a stray line taken")
	}
	quick("another phase", func() { g.at(ctx, history.PhaseAfter, "i1c0", "j1", 1) })
	held := make(chan struct{})
	go func() {
		g.at(ctx, history.PhaseDuring, "i1c1", "j7", 2)
		close(held)
	}()
	deadline := time.Now().Add(time.Second)
	for !strings.Contains(out.String(), `"f":"at-phase"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no at-phase mark: %s", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	for _, want := range []string{`"proc":"i1c1"`, `"key":"j7"`, `"attempt":2`, `"fault":"f#1"`, `"observed":"during-effect"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the at-phase mark lacks %s: %s", want, out.String())
		}
	}
	quick("an arm already taken", func() { g.at(ctx, history.PhaseDuring, "i1c0", "j8", 1) })
	select {
	case <-held:
		t.Fatal("the client went on before its release")
	case <-time.After(50 * time.Millisecond):
	}
	g.command("release f#1")
	select {
	case <-held:
	case <-time.After(time.Second):
		t.Fatal("released, the client still waits")
	}
	g.command("arm f#2 after-effect")
	held = make(chan struct{})
	go func() {
		g.at(ctx, history.PhaseAfter, "i1c0", "j9", 1)
		close(held)
	}()
	time.Sleep(20 * time.Millisecond)
	g.command("disarm f#2")
	select {
	case <-held:
	case <-time.After(time.Second):
		t.Fatal("disarmed, the client still waits")
	}
}
