package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
)

func startFake(t *testing.T, mode string) *Process {
	t.Helper()
	p, err := Start(context.Background(), fakeConfig(t, mode))
	if err != nil {
		t.Fatalf("start %s: %v", mode, err)
	}
	t.Cleanup(func() {
		p.Close()
		if pids := Leftovers(p.Tag()); len(pids) > 0 {
			t.Errorf("%s: processes %v outlived the driver", mode, pids)
		}
	})
	return p
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestStartRefusals: a driver that refuses its options or never answers
// its hello fails its start, saying so, and is gone. The refusal is
// waited for as long as a start may take (a race-built test binary on a
// busy machine is slow to answer): only the silent driver's timeout is
// short, and it never answers whatever the wait.
func TestStartRefusals(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		timeout    time.Duration
	}{
		{"refuse", "driver fake-refuse: refused its start: options: no option frob", time.Minute},
		{"silent", "driver fake-silent: did not answer its hello within 500ms", 500 * time.Millisecond},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			cfg := fakeConfig(t, tc.mode)
			cfg.StartTimeout = tc.timeout
			p, err := Start(context.Background(), cfg)
			if err == nil {
				p.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

// TestBreaks: every way a driver can break makes it broken, with an error
// that names it and says what it did, and leaves no process behind. The
// acquires that lead up to a break are given a minute (a slow answer to
// the first acquire of garbage would break nothing, and the second, whose
// answer is the garbage, would never be sent); only hang's acquire, whose
// timeout is what is tested, has a short one. The waits for the break
// and the exit catch a hang, far beyond what a slow machine takes.
func TestBreaks(t *testing.T) {
	for _, tc := range []struct {
		mode string
		keys []string // acquired in turn by client 0
		want []string
	}{
		{"garbage", []string{"a", "b"}, []string{"driver fake-garbage: line 3 of its output", `"{this is not json"`, "not a protocol message"}},
		{"hang", []string{"hang"}, []string{"did not answer acquire 1 (client 0, key hang) within its timeout of 200ms and 300ms of grace"}},
		{"crash", []string{"a"}, []string{"exited (exit status 7) while lockbench still needed it", "its stderr ends: fake driver: crashing on purpose"}},
		{"wrong-id", []string{"a"}, []string{"line 2 of its output answers id 101, which lockbench did not ask"}},
		{"twice", []string{"a", "b"}, []string{"line 3 of its output answers id 1, which lockbench did not ask or had its answer already"}},
		{"no-token", []string{"a"}, []string{"the driver said its leases carry fencing tokens, but this one has none"}},
		{"stray-lost", []string{"a"}, []string{`never-given`, "client 0 never had that lease"}},
		{"long-line", []string{"a"}, []string{"line 2 of its output is longer than 1048576 bytes"}},
		{"flood", []string{"a"}, []string{"it floods its output (more than 10001 lines no request asked for)"}},
		{"flood-hello", nil, []string{"line 2 of its output", "client 0 never had that lease"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			p := startFake(t, tc.mode)
			l := newLocker(p, 0, false, time.Second, false)
			for _, k := range tc.keys {
				wait := time.Minute
				if k == "hang" {
					wait = 200 * time.Millisecond
				}
				if _, err := l.Acquire(ctxFor(t, wait), k); err != nil {
					break
				}
			}
			select {
			case <-p.Broken():
			case <-time.After(time.Minute):
				t.Fatal("not broken a minute after its last acquire")
			}
			var be *BrokenError
			if !errors.As(p.Err(), &be) {
				t.Fatalf("error %v is not a BrokenError", p.Err())
			}
			for _, w := range tc.want {
				if !strings.Contains(p.Err().Error(), w) {
					t.Errorf("error %q lacks %q", p.Err(), w)
				}
			}
			// Every later call fails at once with the same error.
			if _, err := l.Acquire(ctxFor(t, time.Minute), "z"); !errors.Is(err, p.Err()) {
				t.Errorf("acquire after the break: %v", err)
			}
			select {
			case <-p.Exited():
			case <-time.After(time.Minute):
				t.Error("the broken driver still runs a minute after its break")
			}
		})
	}
}

// TestOutcomes: a driver's answers become the errors the worker records:
// held and effect-none failures of an acquire are certain (fail), any
// other is unknown (info); not_held is ErrNotHeld; lost closes the lease's
// channel.
func TestOutcomes(t *testing.T) {
	p := startFake(t, "good")
	l0 := newLocker(p, 0, false, time.Second, false)
	l1 := newLocker(p, 1, false, time.Second, false)
	ctx := ctxFor(t, 10*time.Second)
	a, err := l0.Acquire(ctx, "k")
	if err != nil || a.Token() == 0 || a.Key() != "k" {
		t.Fatalf("acquire: %v, token %v", err, a)
	}
	if _, err := l1.Acquire(ctx, "k"); !errors.Is(err, backends.ErrNotAcquired) {
		t.Errorf("a held lock: %v, want ErrNotAcquired", err)
	}
	_, err = l1.Acquire(ctx, "unknown")
	if err == nil || errors.Is(err, backends.ErrNotAcquired) || !strings.Contains(err.Error(), "may have taken effect") {
		t.Errorf("an error without an effect: %v, want an unknown outcome", err)
	}
	if _, err := l1.Acquire(ctx, "refused"); !errors.Is(err, backends.ErrNotAcquired) || errors.Is(err, backends.ErrNotSent) || !strings.Contains(err.Error(), "did not take effect") {
		t.Errorf("an error with effect none: %v, want a certain failure", err)
	}
	if _, err := l1.Acquire(ctx, "unsent"); !errors.Is(err, backends.ErrNotSent) || errors.Is(err, backends.ErrNotAcquired) || !strings.Contains(err.Error(), "never sent") {
		t.Errorf("an error with effect unsent: %v, want one never sent", err)
	}
	ext, ok := l0.(backends.Extender)
	if !ok {
		t.Fatal("a driver that can extend has no Extender")
	}
	if err := ext.Extend(ctx, a); err != nil {
		t.Errorf("extend: %v", err)
	}
	if err := l0.Release(ctx, a); err != nil {
		t.Errorf("release: %v", err)
	}
	if err := l0.Release(ctx, a); !errors.Is(err, backends.ErrNotHeld) {
		t.Errorf("second release: %v, want ErrNotHeld", err)
	}
	b, err := l1.Acquire(ctx, "k")
	if err != nil || b.Token() <= a.Token() {
		t.Fatalf("acquire after release: %v (token %d after %d)", err, b.Token(), a.Token())
	}
	if err := l0.Release(ctx, b); err == nil || !strings.Contains(err.Error(), "not this client's") {
		t.Errorf("client 0 releasing client 1's lease: %v", err)
	}
	lose, err := l0.Acquire(ctx, "lose-me")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lose.Lost():
	case <-time.After(time.Minute):
		t.Error("lost was not signalled in a minute")
	}
	if d, err := p.Ping(ctx); err != nil || d <= 0 {
		t.Errorf("ping: %v %v", d, err)
	}
	// A cancelled call is abandoned; the driver's late answer is no break.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l0.Acquire(cctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled acquire: %v", err)
	}
	if p.Err() != nil {
		t.Errorf("broken: %v", p.Err())
	}
}

// TestOneClientPerProcess: a driver that serves one client at a time gets
// a process per client; a concurrent one, one per instance.
func TestOneClientPerProcess(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		procs int
	}{{"good", 1}, {"one-client", 2}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			opts := fmt.Sprintf("{server: redis, tokens: %v, extend: true, command: [%q], env: {%s: %s}}", tc.mode == "good", os.Args[0], envFake, tc.mode)
			b, err := newTestBackend("fake@1.0", opts)
			if err != nil {
				t.Fatal(err)
			}
			shared := backends.NewShared()
			var tags []string
			for c := 0; c < 2; c++ {
				l, err := b.Open(context.Background(), backends.Env{Endpoints: map[string]string{}, TTL: time.Second, Instance: 1, Client: c, Shared: shared})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				lk := l.(interface{ process() *Process }).process()
				if !contains(tags, lk.Tag()) {
					tags = append(tags, lk.Tag())
				}
			}
			if len(tags) != tc.procs {
				t.Errorf("%d driver processes for 2 clients, want %d", len(tags), tc.procs)
			}
			shared.Close()
		})
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestExtensionOutcomes: a release or extension the driver says surely
// did not take effect is refused (fail) only when the driver says the
// lease is not the client's; otherwise it had no effect and said nothing
// of the grant: unsent (MODEL A1), never unknown, which would credit it
// with a renewal.
func TestExtensionOutcomes(t *testing.T) {
	for _, tt := range []struct {
		code, effect              string
		notHeld, notSent, unknown bool
	}{
		{CodeNotHeld, "", true, false, false},
		{CodeUnavailable, EffectNone, false, true, false},
		{CodeUnavailable, EffectUnsent, false, true, false},
		{CodeError, EffectNone, false, true, false},
		{CodeBadRequest, "", false, true, false},
		{CodeTimeout, EffectUnknown, false, false, true},
		{CodeUnavailable, "", false, false, true},
	} {
		for _, op := range []string{TypeExtend, TypeRelease} {
			r := Reply{Type: TypeError, Code: tt.code, Effect: tt.effect}
			err := error(&OpError{Driver: "d", Op: op, Key: "k", Code: r.Code, Definite: r.Definite(), Unsent: r.Unsent()})
			nh, ns := errors.Is(err, backends.ErrNotHeld), errors.Is(err, backends.ErrNotSent)
			if nh != tt.notHeld || ns != tt.notSent || (!nh && !ns) != tt.unknown || errors.Is(err, backends.ErrNotAcquired) {
				t.Errorf("%s answered %s effect %q: not held %v, not sent %v; want %v, %v", op, tt.code, tt.effect, nh, ns, tt.notHeld, tt.notSent)
			}
		}
	}
}
