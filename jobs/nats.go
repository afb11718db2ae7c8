package jobs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
)

// NATS JetStream as the job queue (github.com/nats-io/nats.go's jetstream
// package, on Debian 12's nats-server 2.9.10): the coordinator publishes
// each job, at its due time, to a work-queue stream with the job's id as
// the message id (Nats-Msg-Id: a publish repeated within the stream's
// duplicates window is dropped); the workers fetch from one durable pull
// consumer with explicit acks. A delivered job not acked within the ack
// wait is delivered again, up to max deliver times: at-least-once, so a
// worker paused past the ack wait, or whose ack is lost, runs its job
// while another runs it too.

// NATSServer is the NATS server of the nats strategy.
const NATSServer = "nats-1"

// natsConsumer is the durable consumer every worker fetches from.
const natsConsumer = "workers"

// NATSOptions are the nats strategy's options.
type NATSOptions struct {
	AckWait    config.Duration `yaml:"ack_wait" doc:"how long the server waits for a delivered job's ack before delivering it again (default 500ms)"`
	MaxDeliver int             `yaml:"max_deliver" doc:"deliveries of a job at most, the first included; after them the job is never delivered again (default 0: no limit)"`
	Duplicates config.Duration `yaml:"duplicates" doc:"the stream's dedup window: a publish with a job id published within it is dropped (default 2m, JetStream's)"`
	Idempotent bool            `yaml:"idempotent" doc:"the effect inserts the job's key in its own transaction (an idempotency key): the consumer made idempotent"`
}

func init() {
	Register(Info{Name: "nats", Options: NATSOptions{},
		Summary: "NATS JetStream: each job published at its due time (message id: the job's id, the dedup window) to a work-queue stream; workers fetch from a durable pull consumer and ack after the effect; a job not acked within ack_wait is delivered again",
		New: func(decode backends.Decoder) (Strategy, error) {
			o := NATSOptions{AckWait: config.Duration(500 * time.Millisecond), Duplicates: config.Duration(2 * time.Minute)}
			if err := decode(&o); err != nil {
				return nil, err
			}
			switch {
			case o.AckWait <= 0:
				return nil, fmt.Errorf("ack_wait: must be a positive duration, got %s", o.AckWait)
			case o.MaxDeliver < 0:
				return nil, fmt.Errorf("max_deliver: must be 0 (no limit) or more, got %d", o.MaxDeliver)
			case o.Duplicates <= 0:
				return nil, fmt.Errorf("duplicates: must be a positive duration, got %s", o.Duplicates)
			}
			return natsStrategy{o}, nil
		}})
}

type natsStrategy struct{ o NATSOptions }

func (natsStrategy) Servers() []backends.ServerSpec {
	return []backends.ServerSpec{{Kind: "nats", Name: NATSServer}}
}

// natsNames are a case's stream and subject: the prefix's characters
// that NATS names cannot hold become "_".
func natsNames(prefix string) (stream, subject string) {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, prefix)
	return "LOCKBENCH_JOBS" + clean, "lockbench.jobs" + clean
}

func (s natsStrategy) OpenPublisher(ctx context.Context, endpoints map[string]string, prefix string) (Publication, error) {
	nc, js, err := natsConnect(endpoints, nil, 5*time.Second, "lockbench-publisher")
	if err != nil {
		return nil, err
	}
	stream, subject := natsNames(prefix)
	if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		nc.Close()
		return nil, fmt.Errorf("nats: clear stream %s: %w", stream, err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: s.o.Duplicates.D()})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: create stream %s: %w", stream, err)
	}
	maxDeliver := s.o.MaxDeliver
	if maxDeliver == 0 {
		maxDeliver = -1
	}
	if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: s.o.AckWait.D(), MaxDeliver: maxDeliver}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: create consumer: %w", err)
	}
	return &natsPub{nc: nc, js: js, subject: subject, prefix: prefix}, nil
}

// natsPub publishes jobs; the message id makes a publish repeated after
// an unknown outcome one message (within the dedup window).
type natsPub struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	prefix  string
}

func (p *natsPub) Publish(ctx context.Context, job string) error {
	_, err := p.js.Publish(ctx, p.subject, []byte(job), jetstream.WithMsgID(p.prefix+job))
	if err != nil {
		return fmt.Errorf("nats: publish %s: %w", job, err)
	}
	return nil
}

func (p *natsPub) Close() error { p.nc.Close(); return nil }

// natsDialer routes the client's connections through the instance's
// dialer (so link faults act on them).
type natsDialer struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout time.Duration
}

func (d natsDialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	return d.dial(ctx, network, addr)
}

// natsConnect connects to the strategy's server; it reconnects on its
// own every 100ms after a disconnect, for as long as the client lives.
func natsConnect(endpoints map[string]string, dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration, name string) (*nats.Conn, jetstream.JetStream, error) {
	addr, ok := endpoints[NATSServer]
	if !ok {
		return nil, nil, fmt.Errorf("nats: the cluster has no %s", NATSServer)
	}
	opts := []nats.Option{nats.Name(name), nats.Timeout(timeout), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectJitter(0, 0), nats.DontRandomize()}
	if dial != nil {
		opts = append(opts, nats.SetCustomDialer(natsDialer{dial: dial, timeout: timeout}))
	}
	nc, err := nats.Connect("nats://"+addr, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: connect to %s: %w", addr, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	return nc, js, nil
}

func (s natsStrategy) Open(ctx context.Context, env Env) (Executor, error) {
	b, err := open(ctx, env)
	if err != nil {
		return nil, err
	}
	nc, js, err := natsConnect(env.Endpoints, env.Dial, env.OpTimeout, env.Executor)
	if err != nil {
		b.Close()
		return nil, err
	}
	stream, _ := natsNames(env.Prefix)
	return &natsExec{base: b, o: s.o, nc: nc, js: js, stream: stream}, nil
}

// natsExec takes one job at a time: Pick fetches it, Complete acks it (and
// waits for the server to confirm), Abandon naks it (delivered again at
// once: the attempt applied no effect, or its outcome is unknown, and
// at-least-once delivers it again either way).
type natsExec struct {
	base
	o      NATSOptions
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	cons   jetstream.Consumer
	msg    jetstream.Msg
	job    string
}

// natsFetchWait is how long one fetch waits for a job to be delivered.
const natsFetchWait = 100 * time.Millisecond

func (e *natsExec) Pick(ctx context.Context) (string, error) {
	if e.cons == nil {
		octx, cancel := e.op(ctx)
		c, err := e.js.Consumer(octx, e.stream, natsConsumer)
		cancel()
		if err != nil {
			return "", fmt.Errorf("nats: consumer: %w", err)
		}
		e.cons = c
	}
	e.msg, e.job = nil, ""
	batch, err := e.cons.Fetch(1, jetstream.FetchMaxWait(natsFetchWait))
	if err != nil {
		return "", fmt.Errorf("nats: fetch: %w", err)
	}
	for m := range batch.Messages() {
		e.msg, e.job = m, string(m.Data())
	}
	if e.msg == nil {
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return "", fmt.Errorf("nats: fetch: %w", err)
		}
		return "", ErrNoJob
	}
	return e.job, nil
}

func (e *natsExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	if e.o.Idempotent {
		return e.effect(ctx, e.keyed(job, n, token))
	}
	return e.effect(ctx, e.plain(job, n, token))
}

// Complete acks the job and waits for the server's confirmation: an ack
// lost or unconfirmed is an unknown outcome (the job may be delivered
// again).
func (e *natsExec) Complete(ctx context.Context, job string) error {
	m := e.take(job)
	if m == nil {
		return fmt.Errorf("complete job %s: no delivery of it held", job)
	}
	octx, cancel := e.op(ctx)
	defer cancel()
	if err := m.DoubleAck(octx); err != nil {
		return fmt.Errorf("nats: ack %s: %w", job, err)
	}
	return nil
}

func (e *natsExec) Abandon(job string) {
	if m := e.take(job); m != nil {
		_ = m.Nak()
	}
}

func (e *natsExec) take(job string) jetstream.Msg {
	m := e.msg
	if m == nil || e.job != job {
		return nil
	}
	e.msg, e.job = nil, ""
	return m
}

func (e *natsExec) Close() error {
	e.nc.Close()
	return e.base.Close()
}
