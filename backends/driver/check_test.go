package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// slowTries is client 1's Locker for the exclusion probe: each acquire
// waits its whole context and answers timeout (a library that could not
// answer in time on a busy machine) until the slow ones are used up, then
// answers held.
type slowTries struct {
	slow  int
	tried []time.Duration
}

func (s *slowTries) Acquire(ctx context.Context, key string) (backends.Lease, error) {
	dl, _ := ctx.Deadline()
	s.tried = append(s.tried, time.Until(dl).Round(100*time.Millisecond))
	if len(s.tried) <= s.slow {
		<-ctx.Done()
		return nil, &OpError{Driver: "slow", Op: TypeAcquire, Key: key, Code: CodeTimeout, Message: "no result in time"}
	}
	return nil, &OpError{Driver: "slow", Op: TypeAcquire, Key: key, Code: CodeHeld, Definite: true}
}
func (s *slowTries) Release(context.Context, backends.Lease) error { return nil }
func (s *slowTries) Close() error                                  { return nil }

type heldLease struct{}

func (heldLease) Key() string           { return "check-a" }
func (heldLease) Token() uint64         { return 1 }
func (heldLease) Lost() <-chan struct{} { return nil }

// TestExclusionWidensOnTimeout: a try on a held lock answered timeout
// after its whole window is no finding about exclusion; the probe is made
// again with a wider window, and the step passes once refused, saying what
// came before; unmet at every window, it is a skip naming the machine's
// speed, never a failure.
func TestExclusionWidensOnTimeout(t *testing.T) {
	old := tryWindows
	tryWindows = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}
	defer func() { tryWindows = old }()
	ctx := context.Background()

	s := &slowTries{slow: 1}
	c := &checker{leaseA: heldLease{}}
	c.l[1] = s
	detail, err := c.exclusion(ctx)
	if err != nil || !strings.Contains(detail, "refused") || !strings.Contains(detail, "a 20ms try answered timeout") || len(s.tried) != 2 {
		t.Errorf("one slow try, then held: %q, %v after %v; want a pass naming the timed-out try", detail, err, s.tried)
	}

	s = &slowTries{slow: 3}
	c.l[1] = s
	detail, err = c.exclusion(ctx)
	var skip errSkip
	if !errors.As(err, &skip) || !strings.Contains(skip.why, "machine too slow") || len(s.tried) != 3 {
		t.Errorf("every try slow: %q, %v after %v; want a skip for the machine's speed", detail, err, s.tried)
	}

	// A timeout answered before its window ran out is the driver's
	// own doing: a failure, as before.
	c.l[1] = quickTimeout{}
	if _, err := c.exclusion(ctx); err == nil || errors.As(err, &skip) {
		t.Errorf("a timeout answered at once: %v, want a failure", err)
	}
}

type quickTimeout struct{}

func (quickTimeout) Acquire(_ context.Context, key string) (backends.Lease, error) {
	return nil, &OpError{Driver: "quick", Op: TypeAcquire, Key: key, Code: CodeTimeout}
}
func (quickTimeout) Release(context.Context, backends.Lease) error { return nil }
func (quickTimeout) Close() error                                  { return nil }
