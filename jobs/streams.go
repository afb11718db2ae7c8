package jobs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
)

// Redis Streams as the job queue (github.com/redis/go-redis/v9): the
// coordinator adds each job to a stream at its due time (XADD); workers
// read it in one consumer group (XREADGROUP: the entry stays in the
// group's pending entries list, owned by the reader, until XACK). A
// worker first reclaims an entry pending longer than min_idle (XAUTOCLAIM,
// Redis ≥ 6.2), whoever owns it: the recipe for a consumer that died. A
// paused owner is not dead: both run the job.

// StreamsServer is the Redis server of the redis-streams strategy.
const StreamsServer = "redis-1"

// streamsGroup is the consumer group every worker reads in.
const streamsGroup = "workers"

// StreamsOptions are the redis-streams strategy's options.
type StreamsOptions struct {
	MinIdle    config.Duration `yaml:"min_idle" doc:"how long an entry stays pending (read, not acked) before another worker reclaims it with XAUTOCLAIM (default 500ms)"`
	Idempotent bool            `yaml:"idempotent" doc:"the effect inserts the job's key in its own transaction (an idempotency key): the consumer made idempotent"`
}

func init() {
	Register(Info{Name: "redis-streams", Options: StreamsOptions{},
		Summary: "Redis Streams: each job added at its due time (XADD); workers read in one consumer group (XREADGROUP), ack after the effect (XACK), and first reclaim an entry pending longer than min_idle (XAUTOCLAIM)",
		New: func(decode backends.Decoder) (Strategy, error) {
			o := StreamsOptions{MinIdle: config.Duration(500 * time.Millisecond)}
			if err := decode(&o); err != nil {
				return nil, err
			}
			if o.MinIdle <= 0 {
				return nil, fmt.Errorf("min_idle: must be a positive duration, got %s", o.MinIdle)
			}
			return streamsStrategy{o}, nil
		}})
}

type streamsStrategy struct{ o StreamsOptions }

func (streamsStrategy) Servers() []backends.ServerSpec {
	return []backends.ServerSpec{{Kind: "redis", Name: StreamsServer}}
}

// streamKey is the case's stream.
func streamKey(prefix string) string { return prefix + "lockbench-jobs" }

func streamsClient(endpoints map[string]string, dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) (*redis.Client, error) {
	addr, ok := endpoints[StreamsServer]
	if !ok {
		return nil, fmt.Errorf("redis-streams: the cluster has no %s", StreamsServer)
	}
	return redis.NewClient(&redis.Options{Addr: addr, Dialer: dial, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true}), nil
}

func (s streamsStrategy) OpenPublisher(ctx context.Context, endpoints map[string]string, prefix string) (Publication, error) {
	cl, err := streamsClient(endpoints, nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	key := streamKey(prefix)
	if err := cl.Del(ctx, key).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("redis-streams: clear %s: %w", key, err)
	}
	if err := cl.XGroupCreateMkStream(ctx, key, streamsGroup, "$").Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("redis-streams: create group: %w", err)
	}
	return &streamsPub{cl: cl, key: key}, nil
}

// streamsPub adds jobs. XADD has no dedup: a publish repeated after an
// unknown outcome may add the job twice.
type streamsPub struct {
	cl  *redis.Client
	key string
}

func (p *streamsPub) Publish(ctx context.Context, job string) error {
	if err := p.cl.XAdd(ctx, &redis.XAddArgs{Stream: p.key, Values: []any{"job", job}}).Err(); err != nil {
		return fmt.Errorf("redis-streams: XADD %s: %w", job, err)
	}
	return nil
}

func (p *streamsPub) Close() error { return p.cl.Close() }

func (s streamsStrategy) Open(ctx context.Context, env Env) (Executor, error) {
	b, err := open(ctx, env)
	if err != nil {
		return nil, err
	}
	cl, err := streamsClient(env.Endpoints, env.Dial, env.OpTimeout)
	if err != nil {
		b.Close()
		return nil, err
	}
	return &streamsExec{base: b, o: s.o, cl: cl, key: streamKey(env.Prefix)}, nil
}

// streamsExec takes one entry at a time: Pick reclaims an idle one or
// reads a new one, Complete acks it, Abandon leaves it pending (Redis has
// no negative ack: it is reclaimed once idle for min_idle).
type streamsExec struct {
	base
	o       StreamsOptions
	cl      *redis.Client
	key     string
	id, job string // the entry held
}

func (e *streamsExec) Pick(ctx context.Context) (string, error) {
	e.id, e.job = "", ""
	octx, cancel := e.op(ctx)
	defer cancel()
	msgs, _, err := e.cl.XAutoClaim(octx, &redis.XAutoClaimArgs{Stream: e.key, Group: streamsGroup, Consumer: e.env.Executor,
		MinIdle: e.o.MinIdle.D(), Start: "0-0", Count: 1}).Result()
	if err != nil {
		return "", fmt.Errorf("redis-streams: XAUTOCLAIM: %w", err)
	}
	if len(msgs) == 0 {
		streams, err := e.cl.XReadGroup(octx, &redis.XReadGroupArgs{Group: streamsGroup, Consumer: e.env.Executor,
			Streams: []string{e.key, ">"}, Count: 1, Block: -1}).Result()
		if errors.Is(err, redis.Nil) {
			return "", ErrNoJob
		}
		if err != nil {
			return "", fmt.Errorf("redis-streams: XREADGROUP: %w", err)
		}
		for _, st := range streams {
			msgs = append(msgs, st.Messages...)
		}
	}
	if len(msgs) == 0 {
		return "", ErrNoJob
	}
	job, ok := msgs[0].Values["job"].(string)
	if !ok {
		return "", fmt.Errorf("redis-streams: entry %s has no job", msgs[0].ID)
	}
	e.id, e.job = msgs[0].ID, job
	return job, nil
}

func (e *streamsExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	if e.o.Idempotent {
		return e.effect(ctx, e.keyed(job, n, token))
	}
	return e.effect(ctx, e.plain(job, n, token))
}

// Complete acks the entry (XACK): the answer 0 says another worker's ack
// removed it first, which is no failure of this attempt.
func (e *streamsExec) Complete(ctx context.Context, job string) error {
	if e.job != job || e.id == "" {
		return fmt.Errorf("complete job %s: no entry of it held", job)
	}
	id := e.id
	e.id, e.job = "", ""
	octx, cancel := e.op(ctx)
	defer cancel()
	if err := e.cl.XAck(octx, e.key, streamsGroup, id).Err(); err != nil {
		return fmt.Errorf("redis-streams: XACK %s: %w", job, err)
	}
	return nil
}

func (e *streamsExec) Abandon(string) { e.id, e.job = "", "" }

func (e *streamsExec) Close() error {
	e.cl.Close()
	return e.base.Close()
}
