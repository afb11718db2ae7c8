package worker

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/workload"
)

// fakeLease is lost when its channel is closed.
type fakeLease struct{ lost chan struct{} }

func (fakeLease) Key() string             { return "k" }
func (fakeLease) Token() uint64           { return 1 }
func (l fakeLease) Lost() <-chan struct{} { return l.lost }
func (fakeLocker) Close() error           { return nil }
func (fakeLocker) Acquire(context.Context, string) (backends.Lease, error) {
	return fakeLease{}, nil
}

type fakeLocker struct{ released *int }

func (l fakeLocker) Release(context.Context, backends.Lease) error {
	*l.released++
	return nil
}

// ops runs one critical section and returns its events as "type f" words.
func ops(t *testing.T, w workload.Workload, lease fakeLease) (string, int) {
	t.Helper()
	var out bytes.Buffer
	em := newEmitter(&out, monoclock.Now())
	released := 0
	c := &client{proc: "i1c0", w: w, locker: fakeLocker{&released}, em: em, r: rand.New(rand.NewPCG(1, 2))}
	c.critical(context.Background(), "k", lease)
	if err := em.close(); err != nil {
		t.Fatal(err)
	}
	r := history.NewReader(&out, "emitted")
	var got []string
	for r.Next() {
		got = append(got, string(r.Event().Type)+" "+r.Event().F)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	return strings.Join(got, ", "), released
}

// TestCriticalSectionMarksLostLease: a lease its library reports lost is
// recorded lost before the release is sent, whether the critical section
// does work (watched while it runs) or none (looked at once, with no
// watcher); a lease never lost is simply released.
func TestCriticalSectionMarksLostLease(t *testing.T) {
	noResource := false
	base := workload.Workload{OpTimeout: config.Duration(time.Second), Resource: &noResource}
	hold := base
	hold.Hold = workload.Dist{Dist: "constant", Value: config.Duration(50 * time.Millisecond)}
	instant := base
	instant.Hold = workload.Dist{Dist: "constant", Value: 0}
	closed := make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		name  string
		w     workload.Workload
		lease fakeLease
		want  string
	}{
		{"no work, lost", instant, fakeLease{lost: closed}, "ok lost, invoke release, ok release"},
		{"no work, held", instant, fakeLease{lost: make(chan struct{})}, "invoke release, ok release"},
		{"no work, no signal", instant, fakeLease{}, "invoke release, ok release"},
		{"hold, lost", hold, fakeLease{lost: closed}, "ok lost, invoke release, ok release"},
		{"hold, held", hold, fakeLease{lost: make(chan struct{})}, "invoke release, ok release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, released := ops(t, tc.w, tc.lease)
			if got != tc.want || released != 1 {
				t.Errorf("events %q, %d release(s); want %q, 1", got, released, tc.want)
			}
		})
	}
}
