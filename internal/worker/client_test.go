package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// errLocker answers its acquires with errs in turn and its releases with
// rel.
type errLocker struct {
	errs []error
	rel  error
}

func (l *errLocker) Acquire(context.Context, string) (backends.Lease, error) {
	err := l.errs[0]
	if len(l.errs) > 1 {
		l.errs = l.errs[1:]
	}
	return nil, err
}
func (l *errLocker) Release(context.Context, backends.Lease) error { return l.rel }
func (l *errLocker) Close() error                                  { return nil }

// TestOutcomesOfErrors: an acquire none of whose attempts was sent is
// unsent; one the service refused once is fail; one with an unknown
// attempt is info; a release never sent is unsent (MODEL A1).
func TestOutcomesOfErrors(t *testing.T) {
	notSent := fmt.Errorf("dial: %w", backends.ErrNotSent)
	timeout := errors.New("i/o timeout")
	w := workload.Workload{OpTimeout: config.Duration(time.Second), AcquireTimeout: config.Duration(time.Second),
		Retry: workload.Retry{Attempts: 3, Base: config.Duration(time.Millisecond), Max: config.Duration(time.Millisecond)}}
	for _, tc := range []struct {
		errs []error
		rel  error
		want string
	}{
		{[]error{notSent}, nil, "unsent acquire"},
		{[]error{notSent, backends.ErrNotAcquired, notSent}, nil, "fail acquire"},
		{[]error{notSent, timeout, notSent}, nil, "info acquire"},
		{nil, notSent, "unsent release"},
		{nil, fmt.Errorf("release: %w", backends.ErrNotHeld), "fail release"},
		{nil, timeout, "info release"},
	} {
		var out bytes.Buffer
		em := newEmitter(&out, monoclock.Now())
		l := &errLocker{errs: tc.errs, rel: tc.rel}
		c := &client{proc: "i1c0", w: w, locker: l, em: em, r: rand.New(rand.NewPCG(1, 2))}
		if tc.errs != nil {
			c.acquire(context.Background(), "k", 0)
		} else {
			c.release(context.Background(), "k", fakeLease{}, func() {})
		}
		if err := em.close(); err != nil {
			t.Fatal(err)
		}
		r := history.NewReader(&out, "emitted")
		var last string
		for r.Next() {
			last = string(r.Event().Type) + " " + r.Event().F
		}
		if r.Err() != nil || last != tc.want {
			t.Errorf("%v / %v: %q (%v), want %q", tc.errs, tc.rel, last, r.Err(), tc.want)
		}
	}
}
