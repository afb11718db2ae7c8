package worker

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/lockbench/lockbench/jobs"
)

// This file is a job workload's client (checker/MODEL.md §20): instead of
// the lock loop, each client takes jobs through the case's strategy and
// records each attempt — the job operation around it, the lock's own
// operations when the strategy takes the case's lock, and the effect
// operation — while the sink records, on its side, what it did with each
// effect.

// jobClient is one client running job attempts.
type jobClient struct {
	*client
	ex   jobs.Executor
	lock bool
	// tried counts this client's attempts of each job: attempt numbers.
	tried map[string]int64
	// gates hold the client at an armed phase (gates.go); job and n are
	// the attempt in flight, for the gate inside the effect.
	gates *gates
	job   string
	n     int64
	// periodic: each period is tried once (last is the latest tried).
	periodic bool
	last     string
}

// openJobs opens the case's strategy for each client.
func openJobs(ctx context.Context, cfg Config, dial func(ctx context.Context, network, addr string) (net.Conn, error), clients []*client, g *gates) ([]*jobClient, error) {
	st, err := jobs.New(cfg.Strategy, func(v any) error { return config.DecodeStrictBytes(cfg.StrategyOptions, v, 0) })
	if err != nil {
		return nil, err
	}
	var creds *backends.Credentials
	if cfg.Auth != nil {
		creds = cfg.Auth["postgres"]
	}
	out := make([]*jobClient, len(clients))
	jw := cfg.Workload.Jobs
	for i, cl := range clients {
		jc := &jobClient{client: cl, lock: jobs.TakesLock(st), tried: map[string]int64{}, gates: g, periodic: jw.Periodic}
		env := jobs.Env{Sink: cfg.Endpoints[jobs.SinkServer], Dial: dial, Creds: creds, Prefix: cfg.KeyPrefix,
			Effect: jw.Effect.D(), OpTimeout: cfg.Workload.OpTimeout.D(), Executor: cl.proc,
			First: cfg.JobsFirst, Count: jw.Count, Periodic: jw.Periodic,
			Hold: func(ctx context.Context) { g.at(ctx, history.PhaseDuring, jc.proc, jc.job, jc.n) }}
		ex, err := st.Open(ctx, env)
		if err != nil {
			for _, o := range out[:i] {
				o.ex.Close()
			}
			return nil, err
		}
		jc.ex = ex
		out[i] = jc
	}
	return out, nil
}

func (c *jobClient) jobEvent(typ history.Type, job string, n int64, err string) history.Event {
	e := c.ev(typ, history.OpJob, job)
	e.Attempt, e.Err = n, err
	return e
}

// attempt takes one job through the strategy, or waits the think time
// when none is due. With a lock, the attempt begins once the job's lock is
// held: a client that found it busy gave the job up before beginning (its
// acquire is recorded, no attempt).
func (c *jobClient) attempt(ctx context.Context) {
	job, err := c.ex.Pick(ctx)
	if err == nil && c.periodic && job == c.last {
		err = jobs.ErrNoJob // this period was tried: wait for the next
	}
	if err != nil {
		if !errors.Is(err, jobs.ErrNoJob) && ctx.Err() == nil {
			c.lg.Printf("%s: %v", c.proc, err)
		}
		wait.Sleep(ctx, c.w.Think.Draw(c.r))
		return
	}
	c.last = job
	var lease backends.Lease
	if c.lock {
		var ok bool
		if lease, ok = c.acquire(ctx, job, 0); !ok {
			c.ex.Abandon(job)
			wait.Sleep(ctx, c.w.Think.Draw(c.r))
			return
		}
	}
	c.tried[job]++
	n := c.tried[job]
	c.job, c.n = job, n
	c.em.emit(c.jobEvent(history.Invoke, job, n, ""))
	typ, why := c.steps(ctx, job, n, lease)
	if typ != history.OK {
		c.ex.Abandon(job)
	}
	c.em.emit(c.jobEvent(typ, job, n, why))
	if typ != history.OK {
		wait.Sleep(ctx, c.w.Think.Draw(c.r))
	}
}

// steps runs an attempt's steps and returns its outcome: ok, the job
// recorded complete; fail, no effect applied and the job given up; info,
// unknown. A lease (nil without a lock) is released at the end.
func (c *jobClient) steps(ctx context.Context, job string, n int64, lease backends.Lease) (history.Type, string) {
	var lostOnce sync.Once
	markLost := func() { lostOnce.Do(func() { c.em.emit(c.ev(history.OK, history.OpLost, job)) }) }
	if lease != nil {
		stop := make(chan struct{})
		var watcher sync.WaitGroup
		if lost := lease.Lost(); lost != nil {
			watcher.Add(1)
			go func() {
				defer watcher.Done()
				select {
				case <-lost:
					markLost()
				case <-stop:
				}
			}()
		}
		defer c.release(ctx, job, lease, markLost, func() {
			close(stop)
			watcher.Wait()
		})
	}
	// A fault aimed before the effect meets the job taken (its lock
	// held), its work and the checks before the effect not yet done: where
	// a pause or a death most often finds an executor.
	c.gates.at(ctx, history.PhaseBefore, c.proc, job, n)
	wait.Sleep(ctx, c.w.Hold.Draw(c.r)) // the work before the effect
	if reg, ok := c.ex.(jobs.Registrar); ok {
		done, err := reg.Done(ctx, job)
		switch {
		case err != nil:
			return history.Fail, err.Error() // a read: no effect was sent
		case done:
			return history.Fail, "found done"
		}
	}
	var token uint64
	if lease != nil {
		if !c.stillValid(lease) {
			return history.Fail, "lease lost before the effect"
		}
		token = lease.Token()
	}
	inv := c.ev(history.Invoke, history.OpEffect, job)
	inv.Attempt, inv.Token = n, token
	c.em.emit(inv)
	outcome, err := c.ex.Effect(ctx, job, int(n), token)
	e := c.ev(history.OK, history.OpEffect, job)
	e.Attempt, e.Token, e.Outcome = n, token, outcome
	switch {
	case err != nil:
		e.Type, e.Err, e.Outcome = history.Info, err.Error(), ""
		c.em.emit(e)
		return history.Info, "effect of unknown outcome"
	case outcome == history.OutcomeStale:
		e.Type = history.Fail
		c.em.emit(e)
		return history.Fail, "effect refused as stale"
	case outcome == history.OutcomeDuplicate:
		e.Type = history.Fail
		c.em.emit(e) // the job's effect is in place: the attempt goes on to record it complete
	default:
		c.em.emit(e)
	}
	c.gates.at(ctx, history.PhaseAfter, c.proc, job, n)
	wait.Sleep(ctx, c.w.Jobs.After.D()) // the work after the effect, before its completion is recorded
	if err := c.ex.Complete(ctx, job); err != nil {
		return history.Info, err.Error()
	}
	return history.OK, ""
}
