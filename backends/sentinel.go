package backends

import (
	"context"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"github.com/redis/go-redis/v9"
)

// redis-sentinel is the single-instance algorithm (the same Lua scripts as
// redis) on a replicated master watched by Redis Sentinel, through go-redis'
// failover client. Replication is asynchronous: a lock written on the master
// and not yet replicated is lost when a replica is promoted, and so is the
// fencing counter, which can go backwards after a failover (the Redis
// documentation's "Why failover-based implementations are not enough").
func init() {
	Register(Info{Name: "redis-sentinel",
		Doc: Doc{
			Servers: "master + 1–2 replicas + 3 Sentinels (each announcing and binding its own address, so they agree the master is down and fail over)",
			Models:  "the `redis` scripts on a replicated master through go-redis' failover client",
			Token:   "INCR on the master (can go backwards on failover: counted as token regressions)",
			Lost:    "as `redis`",
			Options: "`replicas` (2), `sentinels` (3), `quorum` (majority), `down_after` (30s), `failover_timeout` (180s), `min_replicas_to_write` (0), `min_replicas_max_lag` (10), `wait_replicas` (0: no WAIT; n: a lock fewer than n replicas acknowledged within `wait_timeout` is given back and does not count), `wait_timeout` (100ms), and the `redis` options"},
		Paused:  Paused{Shows: PauseLost, For: 3 * time.Second},
		Summary: "single-Redis algorithm on a master + replicas watched by 3 Sentinels (go-redis failover client)", Options: SentinelOptions{}, New: newSentinel, Drivers: true})
}

// SentinelOptions configure redis-sentinel; the redis options apply too.
type SentinelOptions struct {
	RedisOptions `yaml:",inline"`
	Replicas     int `yaml:"replicas" doc:"replicas of the master, 1 or 2 (default 2)"`                       // 1 or 2 (default 2)
	Sentinels    int `yaml:"sentinels" doc:"Sentinels watching the master (default 3)"`                       // default 3
	Quorum       int `yaml:"quorum" doc:"Sentinels that must agree the master is down (default: a majority)"` // Sentinels that must agree the master is down (default majority)
	// DownAfter: Sentinel's down-after-milliseconds (default 30s).
	DownAfter config.Duration `yaml:"down_after" doc:"Sentinel down-after-milliseconds (default 30s)"`
	// FailoverTimeout: Sentinel's failover-timeout (default 180s).
	FailoverTimeout config.Duration `yaml:"failover_timeout" doc:"Sentinel failover-timeout (default 180s)"`
	// MinReplicasToWrite and MinReplicasMaxLag (s) of the servers (Redis
	// defaults 0 and 10): a master that lost its replicas refuses writes.
	MinReplicasToWrite int `yaml:"min_replicas_to_write" doc:"a master with fewer replicas refuses writes (default 0: off)"`
	MinReplicasMaxLag  int `yaml:"min_replicas_max_lag" doc:"replica lag in s for min_replicas_to_write (default 10)"`
	// WaitReplicas > 0 sends WAIT <n> <wait_timeout> after each acquisition.
	WaitReplicas int             `yaml:"wait_replicas" doc:"WAIT for this many replicas after each acquisition; fewer acks give the lock back (default 0: off)"`
	WaitTimeout  config.Duration `yaml:"wait_timeout" doc:"timeout of that WAIT (default 100ms)"`
}

type sentinelBackend struct{ opt SentinelOptions }

func newSentinel(decode Decoder) (Backend, error) {
	var o SentinelOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := o.RedisOptions.validate(); err != nil {
		return nil, err
	}
	if err := count("replicas", &o.Replicas, 2, 2); err != nil {
		return nil, err
	}
	if err := count("sentinels", &o.Sentinels, 3, 5); err != nil {
		return nil, err
	}
	if o.Quorum == 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.Quorum < 1 || o.Quorum > o.Sentinels {
		return nil, fmt.Errorf("quorum: %d is outside 1..%d", o.Quorum, o.Sentinels)
	}
	if o.DownAfter == 0 {
		o.DownAfter = config.Duration(30 * time.Second)
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = config.Duration(180 * time.Second)
	}
	if o.DownAfter.D() < time.Millisecond || o.FailoverTimeout.D() < time.Millisecond {
		return nil, fmt.Errorf("down_after and failover_timeout must be at least 1ms")
	}
	if o.MinReplicasToWrite < 0 || o.MinReplicasToWrite > o.Replicas {
		return nil, fmt.Errorf("min_replicas_to_write: %d is outside 0..%d", o.MinReplicasToWrite, o.Replicas)
	}
	if o.MinReplicasMaxLag == 0 {
		o.MinReplicasMaxLag = 10
	}
	if o.WaitReplicas < 0 || o.WaitReplicas > o.Replicas {
		return nil, fmt.Errorf("wait_replicas: %d is outside 0..%d", o.WaitReplicas, o.Replicas)
	}
	if o.WaitReplicas > 0 && o.WaitTimeout == 0 {
		o.WaitTimeout = config.Duration(100 * time.Millisecond)
	}
	return &sentinelBackend{opt: o}, nil
}

func (b *sentinelBackend) Servers() []ServerSpec {
	o := b.opt
	rs := map[string]string{"min-replicas-to-write": fmt.Sprint(o.MinReplicasToWrite), "min-replicas-max-lag": fmt.Sprint(o.MinReplicasMaxLag)}
	var out []ServerSpec
	for i := 1; i <= 1+o.Replicas; i++ {
		out = append(out, ServerSpec{Kind: "redis-replicated", Name: fmt.Sprintf("redis-%d", i), Persistence: o.Persistence, Settings: rs, Args: o.serverArgs()})
	}
	ss := map[string]string{"quorum": fmt.Sprint(o.Quorum), "down-after-milliseconds": fmt.Sprint(o.DownAfter.D().Milliseconds()),
		"failover-timeout": fmt.Sprint(o.FailoverTimeout.D().Milliseconds()), "master": "redis-1", "replicas": fmt.Sprint(o.Replicas)}
	for i := 1; i <= o.Sentinels; i++ {
		out = append(out, ServerSpec{Kind: "sentinel", Name: fmt.Sprintf("sentinel-%d", i), Settings: ss})
	}
	return out
}

func (b *sentinelBackend) Fenced() bool { return *b.opt.Fencing }

func (b *sentinelBackend) Open(ctx context.Context, env Env) (Locker, error) {
	var sentinels []string
	for i := 1; i <= b.opt.Sentinels; i++ {
		name := fmt.Sprintf("sentinel-%d", i)
		addr, ok := env.Endpoints[name]
		if !ok {
			return nil, fmt.Errorf("no endpoint for %s", name)
		}
		sentinels = append(sentinels, addr)
	}
	v, err := env.Shared.Get("sentinel", func() (any, func() error, error) {
		ro := b.opt.clientOptions()
		creds, sc := env.Credentials("redis"), env.Credentials("sentinel")
		tlsCfg, err := creds.TLSConfig()
		if err != nil {
			return nil, nil, err
		}
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "lockbench", SentinelAddrs: sentinels,
			DialTimeout: ro.DialTimeout, ReadTimeout: ro.ReadTimeout, WriteTimeout: ro.WriteTimeout,
			PoolSize: ro.PoolSize, MaxRetries: ro.MaxRetries, ContextTimeoutEnabled: true, Dialer: TLSDial(env.Dialer(), tlsCfg),
			Username: creds.Username(), Password: creds.Password(), SentinelUsername: sc.Username(), SentinelPassword: sc.Password()})
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("ping master through sentinels %v: %w", sentinels, err)
		}
		return c, c.Close, nil
	})
	if err != nil {
		return nil, err
	}
	return &redisExtLocker{&redisLocker{c: v.(*redis.Client), mode: redisSafe, ttl: env.TTL, fencing: *b.opt.Fencing,
		drift: *b.opt.DriftFactor, waitReplicas: b.opt.WaitReplicas, waitTimeout: b.opt.WaitTimeout.D()}}, nil
}

// LeaseTime: the key's PX is the workload's ttl.
func (b *sentinelBackend) LeaseTime(ttl time.Duration) time.Duration { return ttl }
