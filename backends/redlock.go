package backends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/redis/go-redis/v9"
)

// redlock is Redlock over N independent Redis masters through
// github.com/go-redsync/redsync/v4, the Go library people use. The lease's
// validity is redsync's own Until() (expiry minus the time acquisition took
// minus the drift allowance). Redlock has no fencing token: its random
// value cannot be ordered, so the fenced resource cannot protect it, and
// the report says so.
func init() {
	Register(Info{Name: "redlock",
		Doc: Doc{
			Servers: "5 independent redis-server",
			Models:  "Redlock through go-redsync/redsync v4 with go-redis v9 pools; validity from `Until()`",
			Token:   "**none**: the report says so and the fenced resource cannot protect it",
			Lost:    "watchdog on `Until()` (`validity_watchdog: false`: only a failed `Extend()` says so)",
			Options: "`nodes` (5), `tries` (32), `retry_delay` (random 50–250ms), `drift_factor` (0.01), `timeout_factor` (0.05), `set_nx_on_extend` (false), `fail_fast` (false), `shuffle_pools` (false), `validity_watchdog` (true), `persistence`, go-redis timeouts"},
		Paused:  Paused{Shows: PauseLost, For: 3 * time.Second},
		Summary: "Redlock over N independent Redis (redsync v4, go-redis v9); no fencing token", Options: RedlockOptions{}, New: newRedlock, Drivers: true})
}

// RedlockOptions expose redsync's safety-relevant options; unset means the
// library's default. The lock's expiry is the workload's ttl.
type RedlockOptions struct {
	Nodes         int             `yaml:"nodes" doc:"independent Redis servers (default 5)"`                                    // independent Redis servers (default 5)
	Tries         int             `yaml:"tries" doc:"attempts inside one Lock call (redsync default 32)"`                       // attempts inside one Lock call (redsync default 32)
	RetryDelay    config.Duration `yaml:"retry_delay" doc:"fixed delay between tries (default: random 50-250ms)"`               // fixed delay between tries (default: random 50–250ms)
	DriftFactor   *float64        `yaml:"drift_factor" doc:"clock drift allowance, fraction of the TTL (redsync default 0.01)"` // redsync default 0.01
	TimeoutFactor *float64        `yaml:"timeout_factor" doc:"per-node timeout as a fraction of the TTL (default 0.05)"`        // per-node timeout = expiry×factor (default 0.05)
	SetNXOnExtend bool            `yaml:"set_nx_on_extend" doc:"Extend re-creates missing keys (default false)"`                // Extend re-creates missing keys (default false)
	FailFast      bool            `yaml:"fail_fast" doc:"return as soon as a quorum answered (default false)"`                  // return as soon as a quorum answered (default false)
	ShufflePools  bool            `yaml:"shuffle_pools" doc:"shuffle the node order per call (default false)"`                  // default false
	Persistence   string          `yaml:"persistence" doc:"persistence of every node: none (default), everysec or always"`      // of every node: none (default), everysec, always
	ReadTimeout   config.Duration `yaml:"read_timeout" doc:"go-redis read timeout (default 3s)"`                                // go-redis, default 3s
	WriteTimeout  config.Duration `yaml:"write_timeout" doc:"go-redis write timeout (default: read_timeout)"`
	DialTimeout   config.Duration `yaml:"dial_timeout" doc:"go-redis dial timeout (default 5s)"`
	MaxRetries    *int            `yaml:"max_retries" doc:"go-redis retries of a failed command (default 3)"`
	// ValidityWatchdog: the client believes its lease lost when Until()
	// passes (the default, true); false models a client that trusts
	// Extend() alone and notices only when an extension fails.
	ValidityWatchdog *bool `yaml:"validity_watchdog" doc:"give the lease up when Until() passes (default true); false: trust Extend() alone"` // go-redis, default 3
}

type redlockBackend struct{ opt RedlockOptions }

func newRedlock(decode Decoder) (Backend, error) {
	var o RedlockOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := count("nodes", &o.Nodes, 5, 9); err != nil {
		return nil, err
	}
	if o.Tries < 0 {
		return nil, errors.New("tries: must not be negative")
	}
	for name, f := range map[string]*float64{"drift_factor": o.DriftFactor, "timeout_factor": o.TimeoutFactor} {
		if f != nil && (*f < 0 || *f >= 1) {
			return nil, fmt.Errorf("%s: %v is outside [0, 1)", name, *f)
		}
	}
	if err := oneOf("persistence", &o.Persistence, persistenceModes...); err != nil {
		return nil, err
	}
	return &redlockBackend{opt: o}, nil
}

func (b *redlockBackend) Servers() []ServerSpec {
	var out []ServerSpec
	for i := 1; i <= b.opt.Nodes; i++ {
		out = append(out, ServerSpec{Kind: "redis", Name: fmt.Sprintf("redis-%d", i), Persistence: b.opt.Persistence})
	}
	return out
}

func (b *redlockBackend) Fenced() bool { return false }

func (b *redlockBackend) Open(ctx context.Context, env Env) (Locker, error) {
	v, err := env.Shared.Get("redlock", func() (any, func() error, error) {
		var pools []redsyncredis.Pool
		var clients []*redis.Client
		closeAll := func() error {
			var errs []error
			for _, c := range clients {
				errs = append(errs, c.Close())
			}
			return errors.Join(errs...)
		}
		for i := 1; i <= b.opt.Nodes; i++ {
			name := fmt.Sprintf("redis-%d", i)
			addr, ok := env.Endpoints[name]
			if !ok {
				closeAll()
				return nil, nil, fmt.Errorf("no endpoint for %s", name)
			}
			creds := env.Credentials("redis")
			tlsCfg, err := creds.TLSConfig()
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			ro := &redis.Options{Addr: addr, ReadTimeout: b.opt.ReadTimeout.D(), WriteTimeout: b.opt.WriteTimeout.D(),
				DialTimeout: b.opt.DialTimeout.D(), ContextTimeoutEnabled: true, Dialer: TLSDial(env.Dialer(), tlsCfg),
				Username: creds.Username(), Password: creds.Password()}
			if b.opt.MaxRetries != nil {
				ro.MaxRetries = *b.opt.MaxRetries
			}
			c := redis.NewClient(ro)
			clients = append(clients, c)
			if err := c.Ping(ctx).Err(); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("ping %s at %s: %w", name, addr, err)
			}
			pools = append(pools, goredis.NewPool(c))
		}
		return redsync.New(pools...), closeAll, nil
	})
	if err != nil {
		return nil, err
	}
	opts := []redsync.Option{redsync.WithExpiry(env.TTL)}
	o := b.opt
	if o.Tries > 0 {
		opts = append(opts, redsync.WithTries(o.Tries))
	}
	if o.RetryDelay > 0 {
		opts = append(opts, redsync.WithRetryDelay(o.RetryDelay.D()))
	}
	if o.DriftFactor != nil {
		opts = append(opts, redsync.WithDriftFactor(*o.DriftFactor))
	}
	if o.TimeoutFactor != nil {
		opts = append(opts, redsync.WithTimeoutFactor(*o.TimeoutFactor))
	}
	if o.SetNXOnExtend {
		opts = append(opts, redsync.WithSetNXOnExtend())
	}
	opts = append(opts, redsync.WithFailFast(o.FailFast), redsync.WithShufflePools(o.ShufflePools))
	trust := o.ValidityWatchdog != nil && !*o.ValidityWatchdog
	return &redlockLocker{rs: v.(*redsync.Redsync), opts: opts, trustExtend: trust}, nil
}

type redlockLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
	// trustExtend: no validity watchdog; only a failed Extend says lost.
	trustExtend bool
}

type redlockLease struct {
	key string
	m   *redsync.Mutex
	wd  *Watchdog
}

func (l *redlockLease) Key() string           { return l.key }
func (l *redlockLease) Token() uint64         { return 0 }
func (l *redlockLease) Lost() <-chan struct{} { return l.wd.Lost() }

// definitelyNotAcquired reports whether redsync's error means the lock was
// not taken: a quorum of nodes refused or no quorum was reached (redsync
// then released what it had set). Node errors and timeouts are unknown.
func definitelyNotAcquired(err error) bool {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

func (r *redlockLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	m := r.rs.NewMutex("lockbench:lock:"+key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		if definitelyNotAcquired(err) && ctx.Err() == nil {
			return nil, ErrNotAcquired
		}
		return nil, fmt.Errorf("redlock acquire %s: %w", key, err)
	}
	validity := time.Until(m.Until())
	if r.trustExtend {
		validity = 24 * time.Hour // fired only by a failed Extend
	}
	return &redlockLease{key: key, m: m, wd: NewWatchdog(validity)}, nil
}

func (r *redlockLocker) Extend(ctx context.Context, lease Lease) error {
	l, ok := lease.(*redlockLease)
	if !ok {
		return fmt.Errorf("extend: lease of type %T is not a redlock lease", lease)
	}
	ok, err := l.m.ExtendContext(ctx)
	if err != nil || !ok {
		if errors.Is(err, redsync.ErrExtendFailed) || definitelyNotAcquired(err) || (err == nil && !ok) {
			l.wd.Fire()
			return ErrNotHeld
		}
		return fmt.Errorf("redlock extend %s: %w", l.key, err)
	}
	validity := time.Until(l.m.Until())
	if r.trustExtend {
		validity = 24 * time.Hour
	}
	// The nodes extended it (MODEL A1: ok), even when the client's own
	// validity had run out already: its lost signal says so.
	l.wd.Reset(validity)
	return nil
}

func (r *redlockLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*redlockLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a redlock lease", lease)
	}
	l.wd.Stop()
	ok, err := l.m.UnlockContext(ctx)
	switch {
	case errors.Is(err, redsync.ErrLockAlreadyExpired) || definitelyNotAcquired(err):
		return ErrNotHeld
	case err != nil:
		return fmt.Errorf("redlock release %s: %w", l.key, err)
	case !ok:
		return ErrNotHeld
	}
	return nil
}

func (r *redlockLocker) Close() error { return nil }

var (
	_ Locker   = (*redlockLocker)(nil)
	_ Extender = (*redlockLocker)(nil)
)

// LeaseTime: every node's key expires after the workload's ttl.
func (b *redlockBackend) LeaseTime(ttl time.Duration) time.Duration { return ttl }
