package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"github.com/redis/go-redis/v9"
)

// clock-jump moves a Redis server's wall clock forward, as far as its locks
// can tell: Redis expires keys by wall-clock time, so a jump of Δ makes every
// lease Δ shorter at once (Kleppmann's first Redlock counter-example). A real
// jump cannot be made here: libfaketime makes redis-server 7.0 abort at start.
// So it is emulated at the fault instant by a server-side script that
// shortens the remaining TTL of every live lock key by Δ (deleting those that
// would already be gone). Reports say it was emulated.
func init() {
	Register(Info{Name: "clock-jump", Summary: "jump a Redis server's clock forward (emulated: shortens every live lock's TTL by the jump)",
		Targets: []Kind{Server}, Instant: true, Emulated: "emulated by shortening the PTTL of every live lock key by the jump", New: newClockJump})
}

// ClockJumpOptions configure the clock-jump fault.
type ClockJumpOptions struct {
	Jump config.Duration `yaml:"jump"` // how far forward
}

type clockJump struct{ jump time.Duration }

func newClockJump(decode Decoder) (Fault, error) {
	var o ClockJumpOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.Jump <= 0 {
		return nil, errors.New("jump: must be a positive duration (only forward jumps shorten leases)")
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
	if kind != "redis" && kind != "redis-replicated" {
		return nil, fmt.Errorf("clock-jump: %s is a %s server; only Redis expiry is emulated", target, kind)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	var n int64
	seen, err := pollUntil(ctx, jumpWait, func() (bool, error) {
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
	return &Effect{Seen: fmt.Sprintf("shortened the remaining TTL of %d live lock key(s) by %s", n, j.jump), Heal: noHeal}, nil
}
