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

// TestFailuresNameTheirFix: a failed step says the option that would fix
// it where one would (the interpreter, the lease, what the case
// declares), and nothing where the driver itself is wrong.
func TestFailuresNameTheirFix(t *testing.T) {
	own := &Backend{opt: Options{Command: []string{"python3", "my_lock.py"}}}
	for _, tt := range []struct {
		name string
		b    *Backend
		err  error
		want string
	}{
		{"pyenv's python", own, errors.New("exited before answering its hello; its stderr ends: ModuleNotFoundError: No module named 'redis'"), "/usr/bin/python3 instead of python3"},
		{"Debian's python", &Backend{opt: Options{Command: []string{"/usr/bin/python3", "x.py"}}}, errors.New("ModuleNotFoundError: No module named 'redis'"), ""},
		{"the helper", own, errors.New("ModuleNotFoundError: No module named 'lockbench_driver'"), "LOCKBENCH_DRIVERS"},
		{"node modules", &Backend{opt: Options{Command: []string{"node", "l.js"}}}, errors.New("Error: Cannot find module 'redis'"), "NODE_PATH"},
		{"a slow start", own, errors.New("did not answer its hello within 30s"), "start_timeout (now 30s, the default)"},
		{"the lease", own, withFix(errors.New("client 1 could not take the lock"), (&checker{o: CheckOptions{Backend: own}, lease: 2 * time.Second}).leaseFix()), "'{lease: none}'"},
		{"the declarations", own, own.Agree(Reply{Abilities: &Abilities{Token: true, Acquire: []string{"try"}}}), "tokens: true"},
		{"the driver's own bug", own, errors.New("client 1 took check-a while client 0 held it"), ""},
	} {
		c := &checker{o: CheckOptions{Backend: tt.b}}
		got := c.fixFor(tt.err)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: fix %q, want one saying %q", tt.name, got, tt.want)
		}
	}
}
