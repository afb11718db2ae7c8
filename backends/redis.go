package backends

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"github.com/redis/go-redis/v9"
)

// The redis family: the single-instance algorithm from the Redis
// documentation and the seeds (SET key random NX PX ttl; release and extend
// by compare-and-delete / compare-and-pexpire in Lua), and two anti-pattern
// controls from the seeds' list of common errors, which share its code and
// differ in exactly one step:
//
//   - redis-nottl: SET NX without a TTL. A holder that dies without
//     releasing blocks the key forever (a liveness failure, not a safety
//     one).
//   - redis-del: release with a plain DEL. A holder whose lease expired
//     deletes the lock of whoever holds it now, letting a third client in.
//
// The fencing token is an INCR of a per-key counter in the same Lua script
// as the SET, so it is issued only on a genuine acquisition. It lives on the
// same single server, so a restart without persistence resets it (the
// token can go backwards; a scenario can measure that).
func init() {
	Register(Info{Name: "redis",
		Doc: Doc{
			Servers: "1 redis-server",
			Models:  "the Redis documentation's single-instance lock: `SET key random NX PX ttl` + `INCR` of a per-key counter in one Lua script; release and extend by Lua compare-and-delete / compare-and-pexpire",
			Token:   "the INCR counter (a restart without persistence resets it)",
			Lost:    "client watchdog: `ttl − ttl×drift_factor − elapsed`",
			Options: "`persistence` (none; everysec, always), `fencing` (true), `drift_factor` (0.01), go-redis `dial_timeout` (5s), `read_timeout` (3s), `write_timeout`, `max_retries` (3), `pool_size`, `maxmemory` (none) and `maxmemory_policy` (noeviction; allkeys-lru, volatile-lru, … as Redis names them; also for `redis-sentinel`'s servers)"},
		Paused:  Paused{Shows: PauseLost, For: 3 * time.Second},
		Summary: "single Redis: SET NX PX + INCR fencing token; Lua compare-and-delete/pexpire", Options: RedisOptions{}, New: newRedisMode(redisSafe), Drivers: true})
	Register(Info{Name: "redis-del",
		Doc: Doc{
			Servers: "1 redis-server",
			Models:  "control: as `redis`, but release is a plain `DEL` (removes another holder's lock)",
			Token:   "as `redis`",
			Lost:    "as `redis`",
			Options: "as `redis`"},
		Paused:  Paused{Shows: PauseLost, For: 3 * time.Second},
		Summary: "control: as redis but releases with plain DEL (removes another holder's lock)", Unsafe: true, Options: RedisOptions{}, New: newRedisMode(redisDel)})
	Register(Info{Name: "redis-nottl",
		Doc: Doc{
			Servers: "1 redis-server",
			Models:  "control: `SET NX` without a TTL (a dead holder blocks the key forever)",
			Token:   "as `redis`",
			Lost:    "none",
			Options: "as `redis`"},
		Paused:  Paused{Shows: PauseKept, For: 3 * time.Second},
		Summary: "control: SETNX without TTL (a dead holder blocks the key forever)", Unsafe: true, Options: RedisOptions{}, New: newRedisMode(redisNoTTL)})
}

type redisMode int

const (
	redisSafe redisMode = iota
	redisDel
	redisNoTTL
)

// Lua scripts, as in the Redis documentation's distributed-lock pattern.
var (
	acquireScript = redis.NewScript(`
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] == '1' then return redis.call('incr', KEYS[2]) end
  return -1
end
return 0`)
	acquireNoTTLScript = redis.NewScript(`
if redis.call('set', KEYS[1], ARGV[1], 'NX') then
  if ARGV[2] == '1' then return redis.call('incr', KEYS[2]) end
  return -1
end
return 0`)
	releaseScript = redis.NewScript(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`)
	extendScript = redis.NewScript(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0`)
)

// RedisOptions are the scenario options of the redis family. Zero values
// mean the go-redis default.
type RedisOptions struct {
	// Persistence of the server: none (default), everysec or always.
	Persistence string `yaml:"persistence" doc:"server persistence: none (default), everysec or always"`
	// Fencing issues an INCR token with each acquisition (default true).
	Fencing *bool `yaml:"fencing" doc:"issue an INCR fencing token with each acquisition (default true)"`
	// DriftFactor shortens the client's idea of its lease's validity by
	// ttl*factor, as Redlock does (default 0.01).
	DriftFactor *float64 `yaml:"drift_factor" doc:"shorten the client's lease validity by ttl*factor (default 0.01)"`
	// Connection settings of go-redis (defaults: dial 5s, read 3s, write =
	// read, 3 retries, pool 10 per CPU).
	DialTimeout  config.Duration `yaml:"dial_timeout" doc:"go-redis dial timeout (default 5s)"`
	ReadTimeout  config.Duration `yaml:"read_timeout" doc:"go-redis read timeout (default 3s)"`
	WriteTimeout config.Duration `yaml:"write_timeout" doc:"go-redis write timeout (default: read_timeout)"`
	MaxRetries   *int            `yaml:"max_retries" doc:"go-redis retries of a failed command (default 3)"`
	PoolSize     int             `yaml:"pool_size" doc:"go-redis pool size (default 10 per CPU)"`
	// MaxMemory and MaxMemoryPolicy are the server's memory limit and what
	// it does at the limit: a policy other than noeviction may evict a lock
	// key (or its fencing counter) before its TTL, and a second client then
	// acquires (redis #9105, RedLock.net #101); with noeviction the write
	// is refused (OOM) instead. The memory-pressure fault fills the server
	// up to the limit.
	MaxMemory       string `yaml:"maxmemory" doc:"server memory limit (e.g. 4mb; default none)"`
	MaxMemoryPolicy string `yaml:"maxmemory_policy" doc:"what the server does at maxmemory: noeviction (default), allkeys-lru, volatile-lru, allkeys-random, volatile-random, volatile-ttl, allkeys-lfu, volatile-lfu"`
}

// maxMemoryPolicies are Redis's maxmemory-policy values, default first.
var maxMemoryPolicies = []string{"noeviction", "allkeys-lru", "volatile-lru", "allkeys-random", "volatile-random", "volatile-ttl", "allkeys-lfu", "volatile-lfu"}

// serverArgs are the options' settings of a Redis server of the family.
func (o *RedisOptions) serverArgs() []string {
	if o.MaxMemory == "" {
		return nil
	}
	return []string{"--maxmemory", o.MaxMemory, "--maxmemory-policy", o.MaxMemoryPolicy}
}

// clientOptions are the go-redis settings of the options.
func (o *RedisOptions) clientOptions() *redis.Options {
	ro := &redis.Options{
		DialTimeout:           o.DialTimeout.D(),
		ReadTimeout:           o.ReadTimeout.D(),
		WriteTimeout:          o.WriteTimeout.D(),
		PoolSize:              o.PoolSize,
		ContextTimeoutEnabled: true,
	}
	if o.MaxRetries != nil {
		ro.MaxRetries = *o.MaxRetries
	}
	return ro
}

type redisBackend struct {
	mode redisMode
	opt  RedisOptions
}

func newRedisMode(mode redisMode) Constructor {
	return func(decode Decoder) (Backend, error) {
		var o RedisOptions
		if err := decode(&o); err != nil {
			return nil, err
		}
		if err := o.validate(); err != nil {
			return nil, err
		}
		return &redisBackend{mode: mode, opt: o}, nil
	}
}

func (o *RedisOptions) validate() error {
	if err := oneOf("persistence", &o.Persistence, persistenceModes...); err != nil {
		return err
	}
	if o.Fencing == nil {
		t := true
		o.Fencing = &t
	}
	if o.DriftFactor == nil {
		d := 0.01
		o.DriftFactor = &d
	}
	if *o.DriftFactor < 0 || *o.DriftFactor >= 0.5 {
		return fmt.Errorf("drift_factor: %v is outside [0, 0.5)", *o.DriftFactor)
	}
	for name, d := range map[string]config.Duration{"dial_timeout": o.DialTimeout, "read_timeout": o.ReadTimeout, "write_timeout": o.WriteTimeout} {
		if d < 0 {
			return fmt.Errorf("%s: must not be negative", name)
		}
	}
	if o.MaxRetries != nil && *o.MaxRetries < -1 {
		return fmt.Errorf("max_retries: %d (use -1 to disable retries)", *o.MaxRetries)
	}
	if o.PoolSize < 0 {
		return fmt.Errorf("pool_size: must not be negative")
	}
	if o.MaxMemoryPolicy != "" && o.MaxMemory == "" {
		return fmt.Errorf("maxmemory_policy: %q needs a maxmemory", o.MaxMemoryPolicy)
	}
	if err := oneOf("maxmemory_policy", &o.MaxMemoryPolicy, maxMemoryPolicies...); err != nil {
		return err
	}
	if o.MaxMemory != "" && !redisMemory.MatchString(o.MaxMemory) {
		return fmt.Errorf("maxmemory: %q is not a size Redis reads (a number with kb, mb or gb, e.g. 4mb)", o.MaxMemory)
	}
	return nil
}

// redisMemory is a size as redis.conf writes one, its unit required (a
// bare number is bytes, and a limit of a few thousand bytes is always a
// slip: an empty Redis uses about a megabyte).
var redisMemory = regexp.MustCompile(`^[1-9][0-9]*(kb|mb|gb)$`)

func (b *redisBackend) Servers() []ServerSpec {
	return []ServerSpec{{Kind: "redis", Name: "redis-1", Persistence: b.opt.Persistence, Args: b.opt.serverArgs()}}
}

func (b *redisBackend) Fenced() bool { return *b.opt.Fencing }

func (b *redisBackend) Open(ctx context.Context, env Env) (Locker, error) {
	addr, ok := env.Endpoints["redis-1"]
	if !ok {
		return nil, errors.New("no endpoint for redis-1")
	}
	ro := b.opt.clientOptions()
	ro.Addr = addr
	creds := env.Credentials("redis")
	tlsCfg, err := creds.TLSConfig()
	if err != nil {
		return nil, err
	}
	ro.Username, ro.Password = creds.Username(), creds.Password()
	sent := sentCounter(env)
	ro.Dialer = TLSDial(sent.dial(env.Dialer()), tlsCfg)
	// One go-redis client (one connection pool) per application instance,
	// as an application would have.
	v, err := env.Shared.Get("redis", func() (any, func() error, error) {
		c := redis.NewClient(ro)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("ping redis-1 at %s: %w", addr, err)
		}
		return c, c.Close, nil
	})
	if err != nil {
		return nil, err
	}
	c := v.(*redis.Client)
	l := &redisLocker{c: c, mode: b.mode, ttl: env.TTL, fencing: *b.opt.Fencing, drift: *b.opt.DriftFactor, sent: sent}
	if b.mode == redisNoTTL {
		return l, nil
	}
	return &redisExtLocker{l}, nil
}

type redisLocker struct {
	c       *redis.Client
	mode    redisMode
	ttl     time.Duration
	fencing bool
	drift   float64
	// waitReplicas > 0 sends WAIT after a successful acquisition (Sentinel).
	waitReplicas int
	waitTimeout  time.Duration
	// sent tells a request surely never sent (ErrNotSent): go-redis
	// writes a command in the caller's call, retries included. Nil:
	// never claimed.
	sent *sendCounter
}

// unsent is err, marked ErrNotSent when it surely never left (sendCounter).
func (r *redisLocker) unsent(mark int64, err error) error {
	if r.sent == nil {
		return err
	}
	return r.sent.unsent(mark, err)
}

// mark is the instance's sent bytes before an operation.
func (r *redisLocker) mark() int64 {
	if r.sent == nil {
		return 0
	}
	return r.sent.mark()
}

// redisExtLocker adds Extend for the modes that have a TTL.
type redisExtLocker struct{ *redisLocker }

type redisLease struct {
	key, value string
	token      uint64
	wd         *Watchdog // nil without TTL
}

func (l *redisLease) Key() string   { return l.key }
func (l *redisLease) Token() uint64 { return l.token }
func (l *redisLease) Lost() <-chan struct{} {
	if l.wd == nil {
		return nil
	}
	return l.wd.Lost()
}

func lockKey(key string) string  { return "lockbench:lock:" + key }
func fenceKey(key string) string { return "lockbench:fence:" + key }

func randomValue() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random lock value: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// validity is how long the client may believe in a lease sent at start.
func (r *redisLocker) validity(start time.Time) time.Duration {
	v := r.ttl - time.Duration(float64(r.ttl)*r.drift) - time.Since(start)
	if v < 0 {
		return 0
	}
	return v
}

func (r *redisLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	value, err := randomValue()
	if err != nil {
		return nil, err
	}
	fence := "0"
	if r.fencing {
		fence = "1"
	}
	start := time.Now()
	mark := r.mark()
	var n int64
	if r.mode == redisNoTTL {
		n, err = acquireNoTTLScript.Run(ctx, r.c, []string{lockKey(key), fenceKey(key)}, value, fence).Int64()
	} else {
		n, err = acquireScript.Run(ctx, r.c, []string{lockKey(key), fenceKey(key)}, value, r.ttl.Milliseconds(), fence).Int64()
	}
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", key, r.unsent(mark, err))
	}
	if n == 0 {
		return nil, ErrNotAcquired
	}
	if r.waitReplicas > 0 {
		// WAIT bounds how much of the lock a failover can lose (it does not
		// make replication synchronous). A lock fewer replicas than asked
		// acknowledged does not count: it is given back, and the attempt
		// failed (or, if it cannot be given back, its outcome is unknown).
		acked, err := r.c.Wait(ctx, r.waitReplicas, r.waitTimeout).Result()
		if err != nil {
			return nil, fmt.Errorf("acquire %s: WAIT: %w", key, err)
		}
		if acked < int64(r.waitReplicas) {
			n, err := releaseScript.Run(ctx, r.c, []string{lockKey(key)}, value).Int64()
			if err != nil || n == 0 {
				return nil, fmt.Errorf("acquire %s: only %d of %d replicas acknowledged, and giving the lock back failed: %v", key, acked, r.waitReplicas, err)
			}
			return nil, fmt.Errorf("%w: only %d of %d replicas acknowledged the lock within %s", ErrNotAcquired, acked, r.waitReplicas, r.waitTimeout)
		}
	}
	l := &redisLease{key: key, value: value}
	if n > 0 {
		l.token = uint64(n)
	}
	if r.mode != redisNoTTL {
		l.wd = NewWatchdog(r.validity(start))
	}
	return l, nil
}

func (r *redisLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*redisLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a redis lease", lease)
	}
	if l.wd != nil {
		l.wd.Stop()
	}
	var n int64
	var err error
	mark := r.mark()
	if r.mode == redisDel {
		// The anti-pattern: delete whatever is there, ours or not.
		n, err = r.c.Del(ctx, lockKey(l.key)).Result()
	} else {
		n, err = releaseScript.Run(ctx, r.c, []string{lockKey(l.key)}, l.value).Int64()
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", l.key, r.unsent(mark, err))
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

func (r *redisExtLocker) Extend(ctx context.Context, lease Lease) error {
	l, ok := lease.(*redisLease)
	if !ok || l.wd == nil {
		return fmt.Errorf("extend: lease of type %T cannot be extended", lease)
	}
	start := time.Now()
	mark := r.mark()
	n, err := extendScript.Run(ctx, r.c, []string{lockKey(l.key)}, l.value, r.ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("extend %s: %w", l.key, r.unsent(mark, err))
	}
	if n == 0 {
		l.wd.Fire()
		return ErrNotHeld
	}
	// The service extended it (its word: ok, MODEL A1), even when the
	// client's own validity had already run out and said the lease lost:
	// the lost signal says what the client believes; the extension is
	// not refused for it.
	l.wd.Reset(r.validity(start))
	return nil
}

// Close does nothing: the client's pool belongs to the instance (Shared).
func (r *redisLocker) Close() error { return nil }

// Forge returns a lease on key with a random value: not the holder's.
func (r *redisLocker) Forge(key string) Lease {
	v, err := randomValue()
	if err != nil {
		v = "forged"
	}
	return &redisLease{key: key, value: v}
}

var (
	_ Locker   = (*redisLocker)(nil)
	_ Extender = (*redisExtLocker)(nil)
	_ Forger   = (*redisLocker)(nil)
)

// LeaseTime: the key's PX is the workload's ttl (no TTL at all for the
// redis-nottl control).
func (b *redisBackend) LeaseTime(ttl time.Duration) time.Duration {
	if b.mode == redisNoTTL {
		return 0
	}
	return ttl
}
