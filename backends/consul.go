package backends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/lockbench/lockbench/internal/config"
)

// consul is a lock through github.com/hashicorp/consul/api's Lock (the
// helper behind `consul lock`): it creates a session with a TTL, renews it
// every TTL/2, acquires the key with ?acquire=session, and monitors it; the
// channel Lock returns closes when the lock is lost. Consul sessions "prefer
// liveness over safety": the server invalidates a session only after up to
// 2×TTL, then blocks the key for the lock-delay. The fencing token is the
// key's ModifyIndex read (consistently) right after acquiring: a Raft index,
// monotonic across the cluster.
func init() {
	Register(Info{Name: "consul",
		Doc: Doc{
			Servers: "3 Consul 1.14.11 servers",
			Models:  "hashicorp/consul/api v1.34.5 `LockOpts` + `Lock(stopCh)` (a session renewed every TTL/2, `?acquire`, a monitor); released with Consul's own `?release=session`, whose answer says whether the session still held the key (api.Lock's `Unlock` discards it)",
			Token:   "the key's `ModifyIndex` read consistently after acquiring",
			Lost:    "the channel `Lock` returns",
			Options: "`servers` (3; each instance talks to one agent), `session_ttl` (15s; 10s minimum), `lock_delay` (15s; 1ms ≈ none), `lock_wait_time` (15s), `lock_try_once` (false), `monitor_retries` (0), `monitor_retry_time` (2s), `health_checks` (true: serfHealth; false: the session is created with `CreateNoChecks` and read back to prove it has none)"},
		Paused:  Paused{Shows: PauseLost, For: 24 * time.Second, Options: "{session_ttl: 10s, lock_delay: 1ms}"},
		Summary: "Consul session lock (consul/api LockOpts); token = key ModifyIndex", Options: ConsulOptions{}, New: newConsul, Drivers: true})
}

// ConsulOptions expose api.LockOptions; unset means the library's default.
type ConsulOptions struct {
	Servers        int             `yaml:"servers" doc:"Consul servers in the cluster (default 3)"`                                    // default 3
	SessionTTL     config.Duration `yaml:"session_ttl" doc:"session TTL (default 15s; Consul's minimum is 10s)"`                       // default 15s; Consul's minimum is 10s
	LockDelay      config.Duration `yaml:"lock_delay" doc:"lock delay after a session is invalidated (default 15s; use 1ms for none)"` // default 15s (0 is not expressible through the client: use 1ms)
	LockWaitTime   config.Duration `yaml:"lock_wait_time" doc:"blocking query wait of api.Lock (default 15s)"`                         // blocking query wait, default 15s
	LockTryOnce    bool            `yaml:"lock_try_once" doc:"one attempt per Lock call instead of waiting (default false)"`           // default false: wait until acquired or the acquire timeout
	MonitorRetries int             `yaml:"monitor_retries" doc:"retries of the lock monitor on errors (default 0)"`                    // default 0
	MonitorRetry   config.Duration `yaml:"monitor_retry_time" doc:"wait between monitor retries (library default 2s)"`
	// HealthChecks ties the session to the node's serfHealth check (the
	// default, true); false leaves only the TTL.
	HealthChecks *bool `yaml:"health_checks" doc:"tie the session to serfHealth (default true); false leaves only the TTL"`
}

type consulBackend struct{ opt ConsulOptions }

func newConsul(decode Decoder) (Backend, error) {
	var o ConsulOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := count("servers", &o.Servers, 3, 7); err != nil {
		return nil, err
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = config.Duration(15 * time.Second)
	}
	if o.SessionTTL.D() < 10*time.Second || o.SessionTTL.D() > 86400*time.Second {
		return nil, fmt.Errorf("session_ttl: %s is outside Consul's range 10s..86400s", o.SessionTTL)
	}
	if o.LockDelay < 0 || o.LockDelay.D() > 60*time.Second {
		return nil, fmt.Errorf("lock_delay: %s is outside Consul's range 0..60s", o.LockDelay)
	}
	if o.LockWaitTime < 0 || o.MonitorRetries < 0 || o.MonitorRetry < 0 {
		return nil, errors.New("lock_wait_time, monitor_retries and monitor_retry_time must not be negative")
	}
	return &consulBackend{opt: o}, nil
}

func (b *consulBackend) Servers() []ServerSpec {
	var out []ServerSpec
	for i := 1; i <= b.opt.Servers; i++ {
		out = append(out, ServerSpec{Kind: "consul", Name: fmt.Sprintf("consul-%d", i)})
	}
	return out
}

func (b *consulBackend) Fenced() bool { return true }

// OneMember: each instance talks to one agent.
func (b *consulBackend) OneMember() bool { return true }

// Dials: each instance talks to one agent, as applications talk to their
// local agent; instances are spread over the servers.
func (b *consulBackend) Dials(instance, _ int) []string {
	return []string{b.agent(instance)}
}

func (b *consulBackend) agent(instance int) string {
	return fmt.Sprintf("consul-%d", (instance-1)%b.opt.Servers+1)
}

func (b *consulBackend) Open(ctx context.Context, env Env) (Locker, error) {
	name := b.agent(env.Instance)
	addr, ok := env.Endpoints[name]
	if !ok {
		return nil, fmt.Errorf("no endpoint for %s", name)
	}
	v, err := env.Shared.Get("consul", func() (any, func() error, error) {
		tr := cleanhttp.DefaultPooledTransport()
		tr.DialContext = env.Dialer()
		cfg := &api.Config{Address: addr, Transport: tr}
		if creds := env.Credentials("consul"); creds != nil {
			cfg.Token = creds.Token()
			if t := creds.TLS; t != nil {
				cfg.Scheme = "https"
				cfg.TLSConfig = api.TLSConfig{Address: t.ServerName, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}
			}
		}
		cl, err := api.NewClient(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("consul client for %s: %w", addr, err)
		}
		return cl, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return &consulLocker{cl: v.(*api.Client), opt: b.opt}, nil
}

type consulLocker struct {
	cl  *api.Client
	opt ConsulOptions
}

type consulLease struct {
	key   string
	kvKey string // the lock's key in Consul's KV store
	lost  <-chan struct{}
	token uint64
	renew chan struct{} // closing it stops the renewal and destroys the session
	// session and ttl let a release whose outcome is unknown be retried.
	session string
	ttl     time.Duration
}

func (l *consulLease) Key() string           { return l.key }
func (l *consulLease) Token() uint64         { return l.token }
func (l *consulLease) Lost() <-chan struct{} { return l.lost }

// session creates the lock's session as api.Lock would (TTL, lock delay,
// release behaviour), with or without health checks, and proves which by
// reading it back: an empty check list given to Create is dropped by the
// client, and the server then ties the session to serfHealth, so sessions
// without checks go through CreateNoChecks.
func (c *consulLocker) session(ctx context.Context) (string, error) {
	o := c.opt
	se := &api.SessionEntry{Name: "lockbench", TTL: o.SessionTTL.D().String(), LockDelay: o.LockDelay.D(), Behavior: api.SessionBehaviorRelease}
	noChecks := o.HealthChecks != nil && !*o.HealthChecks
	wo := (&api.WriteOptions{}).WithContext(ctx)
	var id string
	var err error
	if noChecks {
		id, _, err = c.cl.Session().CreateNoChecks(se, wo)
	} else {
		id, _, err = c.cl.Session().Create(se, wo)
	}
	if err != nil {
		return "", fmt.Errorf("consul session: %w", err)
	}
	info, _, err := c.cl.Session().Info(id, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || info == nil {
		c.cl.Session().Destroy(id, nil)
		return "", fmt.Errorf("consul session %s: read back: %v", id, err)
	}
	checks := append(append([]string(nil), info.Checks...), info.NodeChecks...)
	if noChecks && len(checks) > 0 {
		c.cl.Session().Destroy(id, nil)
		return "", fmt.Errorf("consul session %s was created with checks %v although health_checks is false", id, checks)
	}
	return id, nil
}

func (c *consulLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	o := c.opt
	kvKey := "lockbench/lock/" + key
	id, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	// api.Lock's blocking query takes no context and notices its stop
	// channel only between queries: its wait must end by the acquire's
	// deadline, or a client waits up to LockWaitTime (15s by default) past
	// its acquire timeout, and past the end of the case.
	wait := o.LockWaitTime.D()
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left < time.Millisecond {
			c.cl.Session().Destroy(id, nil)
			return nil, ErrNotAcquired
		}
		if wait == 0 || left < wait {
			wait = left
		}
	}
	renew := make(chan struct{})
	go c.cl.Session().RenewPeriodic(o.SessionTTL.D().String(), id, nil, renew)
	lock, err := c.cl.LockOpts(&api.LockOptions{Key: kvKey, Session: id, LockWaitTime: wait,
		LockTryOnce: o.LockTryOnce, MonitorRetries: o.MonitorRetries, MonitorRetryTime: o.MonitorRetry.D()})
	if err != nil {
		close(renew)
		return nil, fmt.Errorf("consul lock options: %w", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			close(stop)
		case <-done:
		}
	}()
	lost, err := lock.Lock(stop)
	if err != nil {
		close(renew)
		return nil, fmt.Errorf("consul acquire %s: %w", key, err)
	}
	if lost == nil {
		close(renew)
		return nil, ErrNotAcquired // stopped (acquire timeout) or tried once
	}
	pair, _, err := c.cl.KV().Get(kvKey, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil {
		// We hold it but cannot read the token: give it back and report
		// the acquisition as failed with an unknown outcome.
		lock.Unlock()
		close(renew)
		return nil, fmt.Errorf("consul read token of %s: %v", key, err)
	}
	return &consulLease{key: key, kvKey: kvKey, lost: lost, token: pair.ModifyIndex, renew: renew, session: id, ttl: o.SessionTTL.D()}, nil
}

// Release gives the lock back with Consul's own release (a KV write with
// ?release=session), whose answer says whether this session still held
// the key, and bounded by ctx. api.Lock's Unlock makes the same write
// with no context and throws that answer away: a holder whose session had
// expired while it was paused was told its release succeeded, and never
// learned that it had lost the lock when the lost signal had not fired
// yet (a race seen in TestBackendsAgainstRealClusters). The api.Lock is
// not used again: its monitor ends once the key leaves this session.
func (c *consulLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*consulLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a consul lease", lease)
	}
	defer close(l.renew) // the session goes with the lock, as api.Lock's own would
	released, _, err := c.cl.KV().Release(&api.KVPair{Key: l.kvKey, Session: l.session, Flags: api.LockFlagValue},
		(&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		go c.destroyLater(l.session, l.ttl)
		return fmt.Errorf("consul release %s: %w", l.key, err)
	}
	if !released {
		return ErrNotHeld
	}
	return nil
}

// destroyLater retries destroying a session whose release had an unknown
// outcome (its agent down or unreachable), as a client with an idempotent
// release would, until it succeeds or the session must have expired
// anyway (2 × TTL, Consul's bound). Without it a lock whose holder's agent
// died stays taken until the session TTL runs out, although the holder
// gave it up.
func (c *consulLocker) destroyLater(id string, ttl time.Duration) {
	releaseLater(2*ttl, func(ctx context.Context) bool {
		_, err := c.cl.Session().Destroy(id, (&api.WriteOptions{}).WithContext(ctx))
		return err == nil
	})
}

func (c *consulLocker) Close() error { return nil }

// LeaseTime: the session TTL, the earliest Consul may invalidate a session
// that stopped renewing (it may wait up to twice that).
func (b *consulBackend) LeaseTime(time.Duration) time.Duration { return b.opt.SessionTTL.D() }

// RenewsInBackground: the session is kept alive by the library, unseen.
func (b *consulBackend) RenewsInBackground() bool { return true }

// Cycle: api.Lock renews its session every half TTL.
func (b *consulBackend) Cycle(time.Duration) time.Duration { return b.opt.SessionTTL.D() / 2 }

// ExpiryBound: Consul invalidates a session that stopped renewing up to
// twice its TTL late, and then holds its locks for the lock delay.
func (b *consulBackend) ExpiryBound(time.Duration) time.Duration {
	return 2*b.opt.SessionTTL.D() + b.opt.LockDelay.D()
}
