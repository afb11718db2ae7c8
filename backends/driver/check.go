package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// CheckOptions configure a conformance check of a driver.
type CheckOptions struct {
	Backend *Backend
	// Endpoints are the real addresses of the servers the check runs
	// against (a cluster the caller started for Backend.Servers()).
	Endpoints map[string]string
	// TTL is the lease time the driver is told (default 2s, etcd's
	// shortest with its default timings).
	TTL time.Duration
	// Log receives the driver's stderr.
	Log io.Writer
	// Progress receives a line as each step ends.
	Progress io.Writer
}

// Step statuses.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
	// Note marks a step the driver passed whose result says something
	// about the library a user should know (a release that succeeds
	// after its lease expired).
	Note = "note"
)

// StepResult is one step of a check.
type StepResult struct {
	Name   string
	Status string
	Detail string
	// Fix is, for a failed step, the option (of the case, the check or
	// the driver's command) that would make it pass, when one would.
	Fix  string
	Took time.Duration
}

// CheckReport is a check's outcome.
type CheckReport struct {
	Driver string
	Hello  Reply
	Steps  []StepResult
	// RTT are the protocol's round trips (pings), sorted.
	RTT []time.Duration
}

// Failed counts the failed steps.
func (r *CheckReport) Failed() int {
	n := 0
	for _, s := range r.Steps {
		if s.Status == Fail {
			n++
		}
	}
	return n
}

// checker runs the steps.
type checker struct {
	o      CheckOptions
	rep    *CheckReport
	rs     *Relays
	p      *Process
	procs  []*Process
	l      [2]backends.Locker
	ab     Abilities
	lease  time.Duration
	broken bool
	// c.leaseA and c.leaseB are the leases held between steps.
	leaseA, leaseB backends.Lease
}

// errSkip marks a step that does not apply.
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

// Check proves, against real servers, that a driver speaks the protocol:
// its handshake, every operation it offers, mutual exclusion between two
// of its clients, an answer within each operation's timeout with an
// unknown outcome when its link is cut, its lost signal, its answers to
// requests it cannot serve, and a clean exit leaving no process behind.
// Every step says in words what failed. The error is for a check that
// could not run at all.
func Check(ctx context.Context, o CheckOptions) (*CheckReport, error) {
	if o.TTL <= 0 {
		o.TTL = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rs, err := StartRelays(o.Endpoints, nil)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	c := &checker{o: o, rep: &CheckReport{Driver: o.Backend.Name()}, rs: rs, lease: o.Backend.LeaseTime(o.TTL)}
	defer func() {
		for _, p := range c.procs {
			p.Close()
		}
	}()
	c.run(ctx)
	return c.rep, nil
}

func (c *checker) run(ctx context.Context) {
	if !c.step("handshake", c.handshake(ctx)) {
		return
	}
	steps := []struct {
		name string
		f    func(context.Context) (string, error)
	}{
		{"protocol round trip", c.ping},
		{"acquire", c.acquire},
		{"exclusion", c.exclusion},
		{"hand-off", c.handoff},
		{"extend", c.extendHeld},
		{"release", c.release},
		{"requests it cannot serve", c.badRequests},
		{"expiry", c.expiry},
		{"unknown outcome", c.unknownOutcome},
		{"lost signal", c.lostSignal},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			return
		}
		if c.broken {
			c.record(s.name, Skip, "the driver broke earlier", 0)
			continue
		}
		c.step(s.name, func() (string, error) { return s.f(ctx) })
	}
	c.step("shutdown", c.shutdown)
}

// step runs f and records its result; false if it failed.
func (c *checker) step(name string, f func() (string, error)) bool {
	start := time.Now()
	detail, err := f()
	took := time.Since(start)
	var skip errSkip
	var broken *BrokenError
	switch {
	case errors.As(err, &skip):
		c.record(name, Skip, skip.why, took)
		return true
	case errors.As(err, &broken):
		c.broken = true
		c.fail(name, err, took)
		return false
	case err != nil:
		c.fail(name, err, took)
		return false
	case strings.HasPrefix(detail, "note: "):
		c.record(name, Note, strings.TrimPrefix(detail, "note: "), took)
		return true
	}
	c.record(name, Pass, detail, took)
	return true
}

func (c *checker) record(name, status, detail string, took time.Duration) {
	c.rep.Steps = append(c.rep.Steps, StepResult{Name: name, Status: status, Detail: detail, Took: took})
	mark := map[string]string{Pass: "✓", Fail: "✗", Skip: "–", Note: "!"}[status]
	fmt.Fprintf(c.o.Progress, "  %s %-26s %6.2fs  %s\n", mark, name, took.Seconds(), detail)
}

// fail records a failed step, with the option that would fix it.
func (c *checker) fail(name string, err error, took time.Duration) {
	c.record(name, Fail, err.Error(), took)
	if fix := c.fixFor(err); fix != "" {
		c.rep.Steps[len(c.rep.Steps)-1].Fix = fix
		fmt.Fprintf(c.o.Progress, "  %-36s  fix: %s\n", "", fix)
	}
}

func (c *checker) start(ctx context.Context) (*Process, error) {
	env := backends.Env{Instance: 1, TTL: c.o.TTL}
	cfg, err := c.o.Backend.Config(env, c.o.Backend.HelloServers(c.rs), c.o.Log)
	if err != nil {
		return nil, err
	}
	p, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *checker) handshake(ctx context.Context) func() (string, error) {
	return func() (string, error) {
		p, err := c.start(ctx)
		if err != nil {
			c.broken = true
			return "", err
		}
		c.p = p
		h := p.Hello()
		c.rep.Hello = h
		c.ab = *h.Abilities
		if err := c.o.Backend.Agree(h); err != nil {
			return "", err
		}
		wait := c.o.Backend.wait(c.ab)
		c.l[0] = newLocker(p, 0, wait, c.o.TTL, false)
		q := p
		if !c.ab.Concurrent {
			if q, err = c.start(ctx); err != nil {
				c.broken = true
				return "", fmt.Errorf("a second process, for client 1 (the driver serves one client at a time): %w", err)
			}
		}
		c.l[1] = newLocker(q, 1, wait, c.o.TTL, false)
		lang := ""
		if h.Language != "" {
			lang = " (" + h.Language + ")"
		}
		return fmt.Sprintf("%s %s%s; %s", h.Library, h.Version, lang, describe(c.ab)), nil
	}
}

// describe lists a driver's abilities in words.
func describe(ab Abilities) string {
	var out []string
	yes := func(on bool, s string) {
		if on {
			out = append(out, s)
		}
	}
	yes(ab.Token, "fencing tokens")
	yes(ab.Extend, "extension")
	yes(ab.Lost, "a lost signal")
	out = append(out, "acquire "+strings.Join(ab.Acquire, "|"))
	if ab.Concurrent {
		out = append(out, "clients served concurrently")
	} else {
		out = append(out, "one client per process")
	}
	return strings.Join(out, ", ")
}

func (c *checker) opCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func (c *checker) ping(ctx context.Context) (string, error) {
	const n = 200
	var rtts []time.Duration
	for i := 0; i < n; i++ {
		pctx, cancel := c.opCtx(ctx, 5*time.Second)
		d, err := c.p.Ping(pctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("ping %d of %d: %w", i+1, n, err)
		}
		rtts = append(rtts, d)
	}
	slices.Sort(rtts)
	c.rep.RTT = rtts
	return fmt.Sprintf("median %s, p99 %s over %d pings", rtts[n/2].Round(time.Microsecond), rtts[n*99/100].Round(time.Microsecond), n), nil
}

// take acquires key for client i (waiting up to d).
func (c *checker) take(ctx context.Context, i int, key string, d time.Duration) (backends.Lease, error) {
	actx, cancel := c.opCtx(ctx, d)
	defer cancel()
	return c.l[i].Acquire(actx, key)
}

func (c *checker) give(ctx context.Context, i int, l backends.Lease) error {
	rctx, cancel := c.opCtx(ctx, 5*time.Second)
	defer cancel()
	return c.l[i].Release(rctx, l)
}

func (c *checker) acquire(ctx context.Context) (string, error) {
	l, err := c.take(ctx, 0, "check-a", 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("client 0 could not take a free lock: %w", err)
	}
	c.leaseA = l
	if c.ab.Token {
		return fmt.Sprintf("client 0 took check-a, token %d", l.Token()), nil
	}
	return "client 0 took check-a", nil
}

// tryOnce is how another client probes a held lock: one try when the
// driver offers it, or a short wait.
func (c *checker) tryOnce(ctx context.Context, i int, key string) (backends.Lease, time.Duration, error) {
	return c.tryFor(ctx, i, key, 500*time.Millisecond)
}

func (c *checker) tryFor(ctx context.Context, i int, key string, d time.Duration) (backends.Lease, time.Duration, error) {
	start := time.Now()
	l, err := c.take(ctx, i, key, d)
	return l, time.Since(start), err
}

// tryWindows are the exclusion probe's timeouts: a driver whose library
// could not answer a try within the first (a busy machine: a ZooKeeper
// round trip, a Python thread's turn) answers an unknown outcome, which is
// no finding about exclusion; the probe is made again with a wider one.
var tryWindows = []time.Duration{500 * time.Millisecond, 2 * time.Second, 8 * time.Second}

// timedOut reports whether err is the driver's own "no result within the
// timeout" for a call that took its whole window d.
func timedOut(err error, took, d time.Duration) bool {
	var oe *OpError
	return errors.As(err, &oe) && oe.Code == CodeTimeout && took >= d
}

func (c *checker) exclusion(ctx context.Context) (string, error) {
	if c.leaseA == nil {
		return "", errSkip{"no lock is held (acquire failed)"}
	}
	var slow []string
	for _, d := range tryWindows {
		l, took, err := c.tryFor(ctx, 1, "check-a", d)
		switch {
		case err == nil:
			c.give(ctx, 1, l)
			return "", errors.New("client 1 took check-a while client 0 held it: the driver (or its library) does not exclude")
		case errors.Is(err, backends.ErrNotAcquired):
			detail := fmt.Sprintf("client 1 was refused (%s) in %s", short(err), took.Round(time.Millisecond))
			if len(slow) > 0 {
				detail += " (before: " + strings.Join(slow, ", ") + ")"
			}
			return detail, nil
		case timedOut(err, took, d):
			slow = append(slow, fmt.Sprintf("a %s try answered %s after %s", d, CodeTimeout, took.Round(time.Millisecond)))
			continue
		}
		return "", fmt.Errorf("client 1's attempt on a held lock should be refused (code held, or an error whose effect is none), not: %w", err)
	}
	return "", errSkip{"the machine too slow for the probe: " + strings.Join(slow, ", ") + "; exclusion not checked"}
}

func (c *checker) handoff(ctx context.Context) (string, error) {
	if c.leaseA == nil {
		return "", errSkip{"no lock is held (acquire failed)"}
	}
	if !c.o.Backend.wait(c.ab) {
		first := c.leaseA.Token()
		if err := c.give(ctx, 0, c.leaseA); err != nil {
			return "", fmt.Errorf("client 0's release: %w", err)
		}
		c.leaseA = nil
		l, err := c.take(ctx, 1, "check-a", 5*time.Second)
		if err != nil {
			return "", fmt.Errorf("client 1 could not take check-a once client 0 released it: %w", err)
		}
		c.leaseB = l
		tok, err := c.tokens(first, l)
		return "client 0 released; client 1 took check-a (acquisitions try once: no waiting to check)" + tok, err
	}
	first := c.leaseA.Token()
	// Client 1 waits for the lock; client 0 releases meanwhile: its
	// release must be answered while client 1's acquire is still waiting.
	type result struct {
		l   backends.Lease
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.take(ctx, 1, "check-a", 8*time.Second)
		done <- result{l, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-done:
		if r.err == nil {
			c.give(ctx, 1, r.l)
		}
		return "", fmt.Errorf("client 1's waiting acquire returned before client 0 released (%v)", r.err)
	default:
	}
	relStart := time.Now()
	if err := c.give(ctx, 0, c.leaseA); err != nil {
		return "", fmt.Errorf("client 0's release, while client 1 waited: %w", err)
	}
	relTook := time.Since(relStart)
	c.leaseA = nil
	r := <-done
	if r.err != nil {
		return "", fmt.Errorf("client 1 waited but did not get check-a after client 0 released it: %w", r.err)
	}
	c.leaseB = r.l
	detail := fmt.Sprintf("client 0's release was answered in %s while client 1 waited; client 1 got the lock %s after it",
		relTook.Round(time.Millisecond), r.at.Sub(relStart.Add(relTook)).Round(time.Millisecond))
	tok, err := c.tokens(first, r.l)
	return detail + tok, err
}

// tokens checks that the second holder's token is above the first's.
func (c *checker) tokens(first uint64, second backends.Lease) (string, error) {
	if !c.ab.Token {
		return "", nil
	}
	if second.Token() <= first {
		return "", fmt.Errorf("client 1's token %d is not above client 0's %d: fencing tokens must grow with each holder", second.Token(), first)
	}
	return fmt.Sprintf("; tokens %d then %d", first, second.Token()), nil
}

func (c *checker) extendHeld(ctx context.Context) (string, error) {
	if !c.ab.Extend {
		return "", errSkip{"the driver cannot extend"}
	}
	if c.leaseB == nil {
		return "", errSkip{"no lock is held (hand-off failed)"}
	}
	ext, ok := c.l[1].(backends.Extender)
	if !ok {
		return "", errors.New("the driver said it can extend, but its Locker cannot")
	}
	ectx, cancel := c.opCtx(ctx, 5*time.Second)
	defer cancel()
	if err := ext.Extend(ectx, c.leaseB); err != nil {
		return "", fmt.Errorf("client 1 could not extend the lease it holds: %w", err)
	}
	return "client 1 extended its lease", nil
}

func (c *checker) release(ctx context.Context) (string, error) {
	if c.leaseB == nil {
		return "", errSkip{"no lock is held (hand-off failed)"}
	}
	err := c.give(ctx, 1, c.leaseB)
	c.leaseB = nil
	if err != nil {
		return "", fmt.Errorf("client 1's release of the lock it holds: %w", err)
	}
	l, err := c.take(ctx, 0, "check-a", 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("the lock was released, but client 0 could not take it again: %w", err)
	}
	if err := c.give(ctx, 0, l); err != nil {
		return "", fmt.Errorf("client 0's second release: %w", err)
	}
	return "released, and free again at once", nil
}

func (c *checker) badRequests(ctx context.Context) (string, error) {
	var notes []string
	for _, req := range []Request{
		{Type: "frobnicate", Client: 0},
		{Type: TypeRelease, Client: 0, Lease: "no-such-lease"},
	} {
		rctx, cancel := c.opCtx(ctx, 5*time.Second)
		a, err := c.p.call(rctx, req)
		cancel()
		if err != nil {
			return "", fmt.Errorf("%s: %w", describeReq(req), err)
		}
		if a.reply.Type != TypeError {
			return "", fmt.Errorf("%s was answered ok: a driver must refuse what it cannot serve", describeReq(req))
		}
		notes = append(notes, fmt.Sprintf("%s: %s", describeReq(req), a.reply.Code))
	}
	return strings.Join(notes, "; "), nil
}

func describeReq(r Request) string {
	if r.Type == TypeRelease {
		return "a release of a lease it never gave"
	}
	return fmt.Sprintf("an operation %q", r.Type)
}

// short is an error's text without the driver's name in front.
func short(err error) string {
	var oe *OpError
	if errors.As(err, &oe) {
		s := oe.Code
		if oe.Message != "" {
			s += ": " + oe.Message
		}
		switch {
		case oe.Unsent:
			return s + " (effect unsent)"
		case oe.Definite:
			return s + " (effect none)"
		}
		return s + " (effect unknown)"
	}
	return err.Error()
}
