package faults

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/wait"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockbench/lockbench/internal/config"
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
	Register(Info{Name: "clock-jump", Claims: []string{ClaimProcess, "clock"}, Options: ClockJumpOptions{}, Classes: map[Kind]string{Server: history.ClassClock}, Lasting: true, Summary: "step a server's wall clock forward or back: PostgreSQL for real (libfaketime), Redis emulated (every live lock's TTL moved)",
		Targets: []Kind{Server}, Instant: true, Emulated: "emulated on Redis by shortening the PTTL of every live lock key by the jump; real on PostgreSQL", New: newClockJump,
		Kinds: []string{"redis", "redis-replicated", "postgres"}, NeedsFaketime: []string{"postgres"}})
}

// ClockJumper is implemented by Envs that can move a server's wall clock.
type ClockJumper interface {
	JumpClock(server string, d time.Duration) error
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

func (j clockJump) Start(ctx context.Context, env Env, target string) (*Effect, error) {
	addr, kind, err := env.Server(target)
	if err != nil {
		return nil, err
	}
	if kind == "postgres" {
		return j.postgres(ctx, env, target, addr)
	}
	if kind != "redis" && kind != "redis-replicated" {
		return nil, fmt.Errorf("clock-jump: %s is a %s server; only PostgreSQL's clock can be moved and Redis expiry emulated", target, kind)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	var n int64
	seen, err := wait.Until(ctx, 5*time.Millisecond, jumpWait, func() (bool, error) {
		n, err = jumpScript.Run(ctx, c, nil, "lockbench:lock:*", j.jump.Milliseconds()).Int64()
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
		Emulated: "emulated by moving the PTTL of every live lock key by minus the jump (libfaketime makes redis-server 7.0 abort)"}, nil
}

// postgres moves a PostgreSQL server's clock and sees it move.
func (j clockJump) postgres(ctx context.Context, env Env, target, addr string) (*Effect, error) {
	cj, ok := env.(ClockJumper)
	if !ok {
		return nil, fmt.Errorf("clock-jump: %s's clock cannot be moved here", target)
	}
	skew := func() (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, "postgres://postgres@"+addr+"/postgres?sslmode=disable")
		if err != nil {
			return 0, err
		}
		defer conn.Close(context.Background())
		var t time.Time
		before := time.Now()
		if err := conn.QueryRow(cctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
			return 0, err
		}
		return t.Sub(before), nil
	}
	was, err := skew()
	if err != nil {
		return nil, fmt.Errorf("clock-jump on %s: read its clock: %w", target, err)
	}
	if err := cj.JumpClock(target, j.jump); err != nil {
		return nil, err
	}
	var now time.Duration
	seen, err := wait.Until(ctx, 5*time.Millisecond, 3*time.Second, func() (bool, error) {
		now, err = skew()
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
	return &Effect{Seen: fmt.Sprintf("%s's clock_timestamp() moved %s %s", target, (now - was).Abs().Round(time.Millisecond), dir),
		Heal: func(context.Context) (string, error) { return "", nil }}, nil
}
