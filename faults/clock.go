package faults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/redis/go-redis/v9"
)

// clock-jump steps a server's wall clock forward (jump > 0) or back
// (jump < 0).
//
// PostgreSQL: for real, through libfaketime preloaded into the server (the
// case starts it so when it has a clock jump): its clock_timestamp() moves
// by Δ in every backend process at its next clock read, so every lease
// judged by the database's clock (postgres-lease) is Δ shorter at once
// (forward) or Δ longer (back: an expired lease looks alive, and waiters
// wait past its TTL). The jump is seen by asking the server for its time.
//
// Redis: emulated. Redis expires keys by wall-clock time, so a jump of Δ
// makes every lease Δ shorter at once (Kleppmann's first Redlock
// counter-example), and a step back makes it Δ longer (redis #416: a lock
// alive past its TTL), but libfaketime makes redis-server 7.0 abort at
// start; at the fault instant a server-side script moves the remaining TTL
// of every live lock key by −Δ (deleting those that would already be
// gone). Reports say it was emulated.
//
// Not the others: a time namespace moves only the monotonic clocks, and
// etcd and Consul (Go) read the wall clock through the vDSO, out of
// libfaketime's reach; ZooKeeper times its sessions on the monotonic clock.
func init() {
	Register(Info{Name: "clock-jump",
		Example:  Example{Backend: "postgres", Fault: "{type: clock-jump, jump: 5s, target: postgres-1}"},
		Does:     "the server's wall clock steps by `jump`: forward (`5s`: every lease judged by that clock is shorter at once) or back (`-5s`: longer, so an expired lease still looks alive and waiters wait past its TTL). PostgreSQL: **for real**, the server runs under libfaketime (its own processes only) when a case moves its clock. Redis: **emulated**: libfaketime makes redis-server 7.0 abort, so at the fault instant a server-side script moves the remaining TTL of every live lock key by minus the jump (what Redis' wall-clock expiry would do), waiting up to 1 s for a lock to be held; `faults.jsonl` says so",
		Observed: "PostgreSQL: its `clock_timestamp()` moved by the jump, that way; Redis: it moved at least one live lock's TTL",
		Action:   ActClock, Claims: []string{ClaimProcess, "clock"}, Options: ClockJumpOptions{}, Classes: map[Kind]string{Server: history.ClassClock}, Lasting: true, Summary: "step a server's wall clock forward or back: PostgreSQL for real (libfaketime), Redis emulated (every live lock's TTL moved)",
		Targets: []Kind{Server}, Instant: true, Emulated: "emulated on Redis by shortening the PTTL of every live lock key by the jump; real on PostgreSQL", New: newClockJump,
		Asks: AskClock})
}

// clock-drift makes a server's wall clock run fast (rate > 1) or slow
// (rate < 1) for the window; at heal it runs at the real pace again,
// keeping what it drifted (a drifting clock is not set right by itself).
//
// PostgreSQL: for real, through libfaketime's speed factor, switched on
// and off without a step (cluster.DriftClock); observed by asking the
// server for its time at the start and at the end of the window: the pace
// it kept must be within a tenth of the drift asked.
//
// Redis: emulated, as clock-jump is: every 20 ms of the window, every live
// lock key's remaining TTL is moved by what a clock at that rate would
// have gained, (rate − 1) × 20 ms (fractions carried over), so a lease
// set at rate 1.5 expires after two thirds of its TTL. Observed when a
// live lock was there to move.
//
// Not the others, for the same reasons as clock-jump (Go servers read
// the clock through the vDSO; ZooKeeper times sessions on the monotonic
// clock).
//
// Which way a server's clock goes is its kind's declaration
// (Abilities.Clock: faketime, data or none), never its name.
func init() {
	Register(Info{Name: "clock-drift",
		Example:  Example{Backend: "postgres", Fault: "{type: clock-drift, rate: 1.5, target: postgres-1}"},
		Does:     "the server's wall clock runs at `rate` times the real pace for the window (`1.5`: 50% fast, every lease judged by it ends early; `0.5`: half speed, leases last longer), then at the real pace again, keeping what it drifted. PostgreSQL: **for real**, libfaketime's speed factor, switched on and off without a step (the offset takes up what the rate would add since the process started). Redis: **emulated**, every 20 ms every live lock key's TTL is moved by what the drift gained. Not etcd, Consul (Go reads the clock through the vDSO, out of libfaketime's reach) nor ZooKeeper (it times sessions on the monotonic clock): their locks do not depend on the wall clock's pace",
		Observed: "PostgreSQL: its `clock_timestamp()` kept the pace asked (within a tenth of the drift) over the window, with no step at the switch; Redis: some live lock's TTL was moved, with the adjustments at most 250 ms apart (a longer stretch, a busy machine running the emulation late, let every lease run at the real pace that long: the drift lapsed, and the case is invalid)",
		Action:   ActClockRate, Claims: []string{ClaimProcess, "clock"}, Options: ClockDriftOptions{}, Classes: map[Kind]string{Server: history.ClassClock}, Lasting: true,
		Summary: "make a server's wall clock run fast or slow for the window (rate 1.5, 0.5): PostgreSQL for real (libfaketime's speed factor), Redis emulated (every live lock's TTL moved as the window goes)",
		Targets: []Kind{Server}, Emulated: "emulated on Redis by moving the PTTL of every live lock key every 20 ms by what the drift gained; real on PostgreSQL", New: newClockDrift,
		Asks: AskClock})
}

// ClockDrifter is implemented by Envs that can set the pace of a server's
// wall clock.
type ClockDrifter interface {
	DriftClock(server Target, rate float64) error
}

// ClockDriftOptions configure the clock-drift fault.
type ClockDriftOptions struct {
	Rate float64 `yaml:"rate" doc:"the clock's pace against real time: 1.5 runs 50% fast, 0.5 at half speed (0 < rate <= 10, not 1)"`
}

type clockDrift struct{ rate float64 }

func newClockDrift(decode Decoder) (Fault, error) {
	var o ClockDriftOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Rate <= 0 || o.Rate > 10 || o.Rate == 1 {
		return nil, fmt.Errorf("rate: %g must be above 0, at most 10 and not 1 (1.5: 50%% fast; 0.5: half speed)", o.Rate)
	}
	return clockDrift{rate: o.Rate}, nil
}

// driftTick is how often an emulated drift moves the live leases.
const driftTick = 20 * time.Millisecond

func (d clockDrift) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	addr, kind, err := env.Server(target)
	if err != nil {
		return nil, err
	}
	read, open, err := clockWays(kind)
	if err != nil {
		return nil, fmt.Errorf("clock-drift on %s: %w", target, err)
	}
	if read != nil {
		return d.real(ctx, env, target, addr, read)
	}
	return d.emulated(ctx, target, addr, open)
}

// maxDriftLapse bounds the stretch between two adjustments of the
// emulated drift: one longer is the effect not held (reported, and the
// case judged so), not a drift silently weaker.
const maxDriftLapse = 250 * time.Millisecond

// emulated moves every live lock's expiry as the window goes, from a
// goroutine that the heal stops.
func (d clockDrift) emulated(ctx context.Context, target Target, addr string, open openExpiries) (*Effect, error) {
	c, err := open(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("clock-drift on %s: %w", target, err)
	}
	var (
		mu      sync.Mutex
		moved   int64 // key adjustments
		gained  time.Duration
		lastErr error
		// longest is the longest stretch between two adjustments: a busy
		// machine that ran the emulation late let every lease run at the
		// real pace that long, then caught up at once.
		longest time.Duration
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(driftTick)
		defer t.Stop()
		last, carry := time.Now(), 0.0
		for {
			select {
			case <-stop:
				mu.Lock()
				longest = max(longest, time.Since(last))
				mu.Unlock()
				return
			case now := <-t.C:
				mu.Lock()
				longest = max(longest, now.Sub(last))
				mu.Unlock()
				carry += float64(now.Sub(last)) / float64(time.Millisecond) * (d.rate - 1)
				last = now
				step := int64(carry) // whole ms, the rest carried over
				if step == 0 {
					continue
				}
				n, err := c.Move(context.Background(), time.Duration(step)*time.Millisecond)
				mu.Lock()
				if err != nil {
					lastErr = err
				} else {
					carry -= float64(step)
					gained += time.Duration(step) * time.Millisecond
					moved += n
				}
				mu.Unlock()
			}
		}
	}()
	halt := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
		c.Close()
	}
	return &Effect{
		Seen: fmt.Sprintf("%s's lock TTLs move as a clock at x%g would (emulated)", target, d.rate),
		Check: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if moved == 0 {
				if lastErr != nil {
					return "", fmt.Errorf("clock-drift on %s: %w", target, lastErr)
				}
				return "", &IdleError{Msg: fmt.Sprintf("no lock was held on %s while its clock drifted: no lease was moved", target)}
			}
			held := fmt.Sprintf("the clock gained %s over the window; %d live-lock adjustments, at most %s apart", gained.Round(time.Millisecond), moved, longest.Round(time.Millisecond))
			if longest > maxDriftLapse {
				return "", fmt.Errorf("the emulated drift on %s lapsed: %s (beyond %s: for that long every lease ran at the real pace, then jumped)", target, held, maxDriftLapse)
			}
			return held, nil
		},
		Heal:     func(context.Context) (string, error) { halt(); return "", nil },
		Emulated: "emulated by moving the expiry of every live lock key every 20 ms by what the drift gained (the kind's clock is its data's)",
	}, nil
}

// real sets the server's clock pace and sees it kept.
func (d clockDrift) real(ctx context.Context, env Env, target Target, addr string, read clockReader) (*Effect, error) {
	cd, ok := env.(ClockDrifter)
	if !ok {
		return nil, fmt.Errorf("clock-drift: %s's clock cannot be made to drift here", target)
	}
	was, errWas, err := skewErr(ctx, env, addr, read)
	if err != nil {
		return nil, fmt.Errorf("clock-drift on %s: read its clock: %w", target, err)
	}
	if err := cd.DriftClock(target, d.rate); err != nil {
		return nil, err
	}
	began := time.Now()
	at, errAt, atWhen, err := read(ctx, env, addr)
	if err != nil {
		return nil, fmt.Errorf("clock-drift on %s: read its clock: %w", target, err)
	}
	// The switch must not step the clock: beyond what the drift gained
	// between the switch and the read, it moved by no more than the two
	// reads' own errors (a step of the clock since the process started
	// would be seconds).
	gained := time.Duration(float64(time.Since(began)) * math.Abs(d.rate-1))
	if step := (at - was).Abs(); step > gained+errWas+errAt+50*time.Millisecond {
		return nil, fmt.Errorf("clock-drift on %s: its clock stepped %s when the drift began", target, step.Round(time.Millisecond))
	}
	return &Effect{
		Seen: fmt.Sprintf("%s's clock set to run at x%g", target, d.rate),
		Check: func(ctx context.Context) (string, error) {
			now, errNow, nowWhen, err := read(ctx, env, addr)
			if err != nil {
				return "", fmt.Errorf("clock-drift on %s: read its clock: %w", target, err)
			}
			// The pace between the two reads, timed from when each
			// query began (not from the switch: a slow connection
			// before the first read would count as time not drifted).
			real := nowWhen.Sub(atWhen)
			pace := 1 + float64(now-at)/float64(real)
			// Within a tenth of the drift asked, the reads' own errors
			// spread over the window aside.
			slack := math.Abs(d.rate-1)/10 + float64(errAt+errNow)/float64(real)
			if math.Abs(pace-d.rate) > slack {
				return "", fmt.Errorf("clock-drift on %s: its clock ran at x%.3f over %s, not the x%g asked", target, pace, real.Round(time.Millisecond), d.rate)
			}
			return fmt.Sprintf("%s's clock ran at x%.3f over %s (moved %s against real time)", target, pace, real.Round(time.Millisecond), (now - at).Round(time.Millisecond)), nil
		},
		Heal: func(ctx context.Context) (string, error) {
			if err := cd.DriftClock(target, 1); err != nil {
				return "", err
			}
			// Back at the real pace, the clock keeps what it drifted and
			// drifts no more: two reads half a second apart agree (within
			// a read's error, a tenth of what the drift would add).
			first, errFirst, err := skewErr(ctx, env, addr, read)
			if err != nil {
				return "", fmt.Errorf("clock-drift on %s: read its clock: %w", target, err)
			}
			time.Sleep(500 * time.Millisecond)
			after, errAfter, err := skewErr(ctx, env, addr, read)
			if err != nil {
				return "", fmt.Errorf("clock-drift on %s: read its clock: %w", target, err)
			}
			if moved := (after - first).Abs(); moved > time.Duration(float64(500*time.Millisecond)*math.Abs(d.rate-1)/10)+errFirst+errAfter+20*time.Millisecond {
				return "", fmt.Errorf("clock-drift on %s: set back to the real pace, its clock still moved %s in 500ms", target, moved.Round(time.Millisecond))
			}
			return fmt.Sprintf("%s's clock runs at the real pace again, %s off", target, after.Round(time.Millisecond)), nil
		},
	}, nil
}

// clockReader reads a server's wall clock: how far it is from this
// machine's (read just before the query), how long the read took (the
// server read its clock somewhere in that time, so the skew is known to
// within it: on a loaded machine, hundreds of milliseconds), and when the
// read began (after the connection, which on a loaded machine can take
// longer still). It is how a fault sees a clock it moved for real move.
type clockReader func(ctx context.Context, env Env, addr string) (skew, took time.Duration, began time.Time, err error)

// clockReaders are the clock readers by the protocol a kind speaks
// (Abilities.Speaks): a kind whose clock moves for real (ClockFaketime)
// needs one.
var clockReaders = map[Protocol]clockReader{ProtoPostgres: pgSkewAt}

// expiries move the expiry of every live lock on a server: how a fault
// emulates a clock on a kind whose clock is its data's (ClockData).
type expiries interface {
	// Move moves every live lock's expiry by -d (sooner when d > 0, as a
	// clock stepped forward would have it), deleting those that would
	// already be gone, and returns how many locks it moved.
	Move(ctx context.Context, d time.Duration) (int64, error)
	Close() error
}

// openExpiries connects an expiries to a server.
type openExpiries func(ctx context.Context, addr string) (expiries, error)

// dataClocks are the expiries by the protocol a kind speaks: a kind whose
// clock is emulated (ClockData) needs one.
var dataClocks = map[Protocol]openExpiries{ProtoRedis: redisExpiries}

// clockWays is how a fault moves a kind's clock: a reader of its real
// clock (ClockFaketime), or a mover of its expiries (ClockData).
func clockWays(k ServerKind) (clockReader, openExpiries, error) {
	switch k.Clock {
	case ClockFaketime:
		if r := clockReaders[k.Speaks]; r != nil {
			return r, nil, nil
		}
	case ClockData:
		if m := dataClocks[k.Speaks]; m != nil {
			return nil, m, nil
		}
	}
	return nil, nil, fmt.Errorf("%s server's clock no fault can move (its kind declares clock %q, speaking %q)", config.Article(k.Name), k.Clock, k.Speaks)
}

// skew is a clock reader's skew alone.
func skew(ctx context.Context, env Env, addr string, read clockReader) (time.Duration, error) {
	s, _, _, err := read(ctx, env, addr)
	return s, err
}

// skewErr is a clock reader's skew and its error, without the instant.
func skewErr(ctx context.Context, env Env, addr string, read clockReader) (time.Duration, time.Duration, error) {
	s, e, _, err := read(ctx, env, addr)
	return s, e, err
}

// redisLocks moves the PTTL of every live lock key of a Redis server.
type redisLocks struct{ c *redis.Client }

func redisExpiries(ctx context.Context, addr string) (expiries, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return redisLocks{c}, nil
}

func (r redisLocks) Move(ctx context.Context, d time.Duration) (int64, error) {
	return jumpScript.Run(ctx, r.c, nil, "lockbench:lock:*", d.Milliseconds()).Int64()
}

func (r redisLocks) Close() error { return r.c.Close() }

// pgSkewAt is the clock reader of PostgreSQL: its clock_timestamp().
func pgSkewAt(ctx context.Context, env Env, addr string) (time.Duration, time.Duration, time.Time, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgConnect(cctx, env, addr)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	defer conn.Close(context.Background())
	var t time.Time
	before := time.Now()
	if err := conn.QueryRow(cctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return 0, 0, time.Time{}, err
	}
	return t.Sub(before), time.Since(before), before, nil
}

// PostgresAdmin is implemented by Envs that can connect a fault to a
// PostgreSQL server as its administrator, to observe it (its clock): the
// connection's settings, with user postgres on lockbench's own servers
// and a targets file's credentials on others.
type PostgresAdmin interface {
	PostgresConfig(addr string, timeout time.Duration) (*pgx.ConnConfig, error)
}

// pgConnect connects to a PostgreSQL server as its administrator.
func pgConnect(ctx context.Context, env Env, addr string) (*pgx.Conn, error) {
	a, ok := env.(PostgresAdmin)
	if !ok {
		return nil, errors.New("this run cannot connect to a PostgreSQL server as its administrator")
	}
	timeout := 2 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	cfg, err := a.PostgresConfig(addr, timeout)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ClockJumper is implemented by Envs that can move a server's wall clock.
type ClockJumper interface {
	JumpClock(server Target, d time.Duration) error
}

// ClockJumpOptions configure the clock-jump fault.
type ClockJumpOptions struct {
	Jump config.Duration `yaml:"jump" doc:"how far the clock steps: forward (5s) or back (-5s)"`
}

type clockJump struct{ jump time.Duration }

func newClockJump(decode Decoder) (Fault, error) {
	var o ClockJumpOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Jump == 0 {
		return nil, errors.New("jump: must be a non-zero duration (5s forward, -5s back)")
	}
	return clockJump{jump: o.Jump.D()}, nil
}

var jumpScript = redis.NewScript(`
local n = 0
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  local t = redis.call('PTTL', k)
  if t > 0 then
    local left = t - tonumber(ARGV[2])
    if left <= 0 then redis.call('DEL', k) else redis.call('PEXPIRE', k, left) end
    n = n + 1
  end
end
return n`)

// jumpWait is how long a clock jump waits for a live lock to act on: a
// jump while nothing is held changes no lease, so it would prove nothing.
const jumpWait = time.Second

func (j clockJump) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	addr, kind, err := env.Server(target)
	if err != nil {
		return nil, err
	}
	read, open, err := clockWays(kind)
	if err != nil {
		return nil, fmt.Errorf("clock-jump on %s: %w", target, err)
	}
	if read != nil {
		return j.real(ctx, env, target, addr, read)
	}
	c, err := open(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("clock-jump on %s: %w", target, err)
	}
	defer c.Close()
	var n int64
	seen, err := wait.Until(ctx, 5*time.Millisecond, jumpWait, func() (bool, error) {
		n, err = c.Move(ctx, j.jump)
		return n > 0, err
	})
	if err != nil {
		return nil, fmt.Errorf("clock-jump on %s: %w", target, err)
	}
	if !seen {
		return nil, fmt.Errorf("clock-jump on %s: no lock was held there within %s, so the jump would shorten no lease", target, jumpWait)
	}
	// Time does not jump back: there is nothing to heal.
	how := fmt.Sprintf("shortened the remaining TTL of %d live lock key(s) by %s", n, j.jump)
	if j.jump < 0 {
		how = fmt.Sprintf("lengthened the remaining TTL of %d live lock key(s) by %s", n, -j.jump)
	}
	return &Effect{Seen: how, Heal: noHeal,
		Emulated: "emulated by moving the expiry of every live lock key by minus the jump (the kind's clock is its data's)"}, nil
}

// real moves a server's clock and sees it move.
func (j clockJump) real(ctx context.Context, env Env, target Target, addr string, read clockReader) (*Effect, error) {
	cj, ok := env.(ClockJumper)
	if !ok {
		return nil, fmt.Errorf("clock-jump: %s's clock cannot be moved here", target)
	}
	skewNow := func() (time.Duration, error) { return skew(ctx, env, addr, read) }
	was, err := skewNow()
	if err != nil {
		return nil, fmt.Errorf("clock-jump on %s: read its clock: %w", target, err)
	}
	if err := cj.JumpClock(target, j.jump); err != nil {
		return nil, err
	}
	var now time.Duration
	seen, err := wait.Until(ctx, 5*time.Millisecond, 3*time.Second, func() (bool, error) {
		now, err = skewNow()
		moved := now - was
		if j.jump < 0 {
			return moved <= j.jump*9/10, err
		}
		return moved >= j.jump*9/10, err
	})
	if err != nil {
		return nil, fmt.Errorf("clock-jump on %s: %w", target, err)
	}
	if !seen {
		return nil, fmt.Errorf("clock-jump on %s: its clock moved %s, not the %s asked", target, (now - was).Round(time.Millisecond), j.jump)
	}
	dir := "ahead"
	if j.jump < 0 {
		dir = "back"
	}
	return &Effect{Seen: fmt.Sprintf("%s's clock moved %s %s", target, (now - was).Abs().Round(time.Millisecond), dir),
		Heal: func(context.Context) (string, error) { return "", nil }}, nil
}
