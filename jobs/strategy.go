// Package jobs holds the job strategies lockbench compares, one file per
// family, each registered by name, and the effect sink they all apply their
// effects to (checker/MODEL.md §20).
//
// A job workload is N one-off jobs, each due at its time and each with one
// external effect. Every client of every instance takes jobs through the
// case's strategy: a lock around the job (the case's backend), an
// idempotency key, a queue with FOR UPDATE SKIP LOCKED... and applies the
// job's effect to the sink, a PostgreSQL database that records every
// effect it committed, with its executor, attempt and token, and whether
// it applied it or refused it as a duplicate or as stale. The sink's
// records, read by the coordinator (never written into the history by a
// worker), are the proof of what ran; the workers' events are what each
// executor believed.
//
// A Strategy is small: Open gives one client's Executor, whose steps the
// worker runs in one order — Pick a job, [take the case's lock], work,
// [check the register], Effect, work, Complete, [release] — recording each
// step. Abilities only some strategies have are interfaces found by type
// assertion: Locking (it takes the case's lock around each job),
// Registrar (it checks a completion record before the effect), Electing
// (its clients take jobs only while elected leader through the case's
// backend), Serving (it needs servers of its own: a broker) and Publisher
// (the coordinator publishes each job to that broker at its due time).
package jobs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
)

// ErrNoJob is Pick's answer when no job is due that the strategy would
// take: the client waits and looks again.
var ErrNoJob = errors.New("no job to take")

// Env is what an executor needs: the sink's address and how to dial it.
type Env struct {
	// Sink is the sink PostgreSQL's real address; Dial routes it like
	// every other connection of the instance (so link faults act on it).
	Sink string
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Creds authenticate to a sink lockbench did not start (nil: none).
	Creds *backends.Credentials
	// Prefix is put before every job id in the sink (a shared cluster's
	// rows are the case's own); Executor strips it from what it returns.
	Prefix string
	// Effect is how long an effect's transaction lasts at the sink before
	// it commits (the job's "during" phase).
	Effect time.Duration
	// OpTimeout bounds one statement.
	OpTimeout time.Duration
	// Executor is the client's name (i<N>c<M>), as the sink records it.
	Executor string
	// Endpoints maps every server of the case's cluster to its real
	// address (a broker's), dialed through Dial.
	Endpoints map[string]string
}

// Strategy is a configured way of running jobs.
type Strategy interface {
	// Open connects one client to the sink.
	Open(ctx context.Context, env Env) (Executor, error)
}

// Locking is implemented by strategies that take the case's lock (its
// backend's Locker, on the job's id as key) around each job; Fenced says
// the effect carries the lock's fencing token and the sink refuses one
// below the highest it applied for the job.
type Locking interface {
	TakesLock() bool
}

// Electing is implemented by strategies whose clients take jobs only
// while elected leader: each client campaigns through the case's
// backend's election (backends.Elector), and an attempt runs under the
// term it won, as a lock's attempt runs under its lease.
type Electing interface {
	Elects() bool
}

// Serving is implemented by strategies that need servers of their own
// beside the sink (a broker); the case's cluster starts them.
type Serving interface {
	Servers() []backends.ServerSpec
}

// Publisher is implemented by strategies whose jobs reach the workers
// through a broker, not the sink's job list: the coordinator publishes
// each job at its due time.
type Publisher interface {
	// OpenPublisher connects the coordinator to the broker (endpoints:
	// real addresses, dialed plainly: the coordinator is outside every
	// fault) and makes the case's queue new and empty before any worker
	// picks (a stream and its consumer, a consumer group).
	OpenPublisher(ctx context.Context, endpoints map[string]string, prefix string) (Publication, error)
}

// Publication is the coordinator's side of a broker.
type Publication interface {
	// Publish puts job (its id without the prefix) on the broker. An
	// error leaves it unknown whether the broker kept it: the caller
	// publishes it again (a broker with a dedup window drops the second).
	Publish(ctx context.Context, job string) error
	Close() error
}

// Executor runs the steps of one client's job attempts. Its methods are
// called from one goroutine.
type Executor interface {
	// Pick finds a job that is due and, as far as the strategy can see,
	// not done, and takes it where the strategy takes jobs (a queue's
	// row). ErrNoJob: none. The job id is returned without the prefix.
	Pick(ctx context.Context) (string, error)
	// Effect applies the job's effect at the sink, as attempt n with
	// token (0: none), and returns the sink's outcome (history.Outcome*).
	Effect(ctx context.Context, job string, n int, token uint64) (string, error)
	// Complete records the job complete (and commits what Pick took).
	Complete(ctx context.Context, job string) error
	// Abandon gives back what Pick took after a step failed (a queue's
	// transaction rolled back); it never fails the attempt further.
	Abandon(job string)
	Close() error
}

// Registrar is implemented by executors that check a completion record
// before the effect: Done reports whether the job is already recorded
// complete (or its effect already applied), in which case the attempt
// gives the job up without an effect.
type Registrar interface {
	Done(ctx context.Context, job string) (bool, error)
}

// Info describes a registered strategy.
type Info struct {
	Name    string
	Summary string
	// Lock: the strategy takes the case's backend's lock; without it, the
	// case names no backend (the sink's PostgreSQL is its server).
	Lock bool
	// Elects: the strategy campaigns in the case's backend's election
	// (Electing); the case names a backend that can elect.
	Elects bool
	// Unsafe marks a known-unsafe control, there to show the failure.
	Unsafe bool
	// Options is the zero value of its options struct (yaml and doc
	// tags), for bench list; nil: none.
	Options any
	New     func(decode backends.Decoder) (Strategy, error)
}

var registry = config.NewRegistry[Info]("job strategy")

// Register adds a strategy; a duplicate name panics at start-up.
func Register(info Info) {
	if info.New == nil {
		panic("jobs: Register with a nil constructor")
	}
	registry.Register(info.Name, info)
}

// Lookup returns the strategy registered under name.
func Lookup(name string) (Info, error) { return registry.Lookup(name) }

// All lists every strategy, by name.
func All() []Info { return registry.All() }

// New builds the strategy registered under name from its options.
func New(name string, decode backends.Decoder) (Strategy, error) {
	info, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	s, err := info.New(decode)
	if err != nil {
		return nil, fmt.Errorf("strategy %s: %w", name, err)
	}
	return s, nil
}

// TakesLock reports whether s takes the case's lock around each job.
func TakesLock(s Strategy) bool {
	l, ok := s.(Locking)
	return ok && l.TakesLock()
}

// Elects reports whether s's clients take jobs only while elected.
func Elects(s Strategy) bool {
	e, ok := s.(Electing)
	return ok && e.Elects()
}

// Servers lists the servers s needs beside the sink (none for most).
func Servers(s Strategy) []backends.ServerSpec {
	if sv, ok := s.(Serving); ok {
		return sv.Servers()
	}
	return nil
}

// SinkServer is the server the sink runs on: the PostgreSQL the
// postgres backends use.
const SinkServer = "postgres-1"

// SinkSpec is the sink's server, for a cluster that lacks it.
func SinkSpec() backends.ServerSpec { return backends.ServerSpec{Kind: "postgres", Name: SinkServer} }

// WithSink returns servers with the sink's server added when missing.
func WithSink(servers []backends.ServerSpec) []backends.ServerSpec {
	for _, s := range servers {
		if s.Name == SinkServer {
			return servers
		}
	}
	return append(append([]backends.ServerSpec(nil), servers...), SinkSpec())
}
