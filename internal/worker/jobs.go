package worker

import (
	"context"
	"errors"
	"fmt"
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
	// elect: the strategy takes jobs only while this client leads the
	// case's election (jobs.Electing); term is the term it won, nil while
	// it does not lead.
	elect bool
	mu    sync.Mutex
	term  backends.Lease
	name  string // the election's name: the case's prefix, then jobs.LeaderElection
}

// openJobs opens the case's strategy for each client.
func openJobs(ctx context.Context, cfg Config, dial func(ctx context.Context, network, addr string) (net.Conn, error), clients []*client) ([]*jobClient, error) {
	st, err := jobs.New(cfg.Strategy, func(v any) error { return config.DecodeStrictBytes(cfg.StrategyOptions, v, 0) })
	if err != nil {
		return nil, err
	}
	var creds *backends.Credentials
	if cfg.Auth != nil {
		creds = cfg.Auth["postgres"]
	}
	out := make([]*jobClient, len(clients))
	for i, cl := range clients {
		env := jobs.Env{Sink: cfg.Endpoints[jobs.SinkServer], Dial: dial, Creds: creds, Prefix: cfg.KeyPrefix,
			Effect: cfg.Workload.Jobs.Effect.D(), OpTimeout: cfg.Workload.OpTimeout.D(), Executor: cl.proc, Endpoints: cfg.Endpoints}
		ex, err := st.Open(ctx, env)
		if err != nil {
			for _, o := range out[:i] {
				o.ex.Close()
			}
			return nil, err
		}
		out[i] = &jobClient{client: cl, ex: ex, lock: jobs.TakesLock(st), tried: map[string]int64{},
			elect: jobs.Elects(st), name: cfg.KeyPrefix + jobs.LeaderElection}
		if out[i].elect && cl.elector == nil {
			for _, o := range out[:i+1] {
				o.ex.Close()
			}
			return nil, fmt.Errorf("strategy %s campaigns in a leader election: backend %s has none", cfg.Strategy, cfg.Backend)
		}
	}
	return out, nil
}

func (c *jobClient) job(typ history.Type, job string, n int64, err string) history.Event {
	e := c.ev(typ, history.OpJob, job)
	e.Attempt, e.Err = n, err
	return e
}

// campaign runs the client's candidacy until the returned stop is
// called: it campaigns, holds the term it won until the election
// library says it is lost, resigns (which cleans up what a lost term
// left), and campaigns again. A client paused while leading keeps its
// term in its own eyes until it runs again and its library learns.
func (c *jobClient) campaign(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			term, err := c.elector.Campaign(ctx, c.name)
			if err != nil {
				if ctx.Err() == nil {
					c.lg.Printf("%s: campaign: %v", c.proc, err)
					wait.Sleep(ctx, c.w.Think.Draw(c.r))
				}
				continue
			}
			c.lg.Printf("%s: elected, token %d", c.proc, term.Token())
			c.setTerm(term)
			select {
			case <-term.Lost():
				c.lg.Printf("%s: term %d lost", c.proc, term.Token())
			case <-ctx.Done():
			}
			c.setTerm(nil)
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.w.OpTimeout.D())
			if err := c.elector.Resign(rctx, term); err != nil && ctx.Err() == nil {
				c.lg.Printf("%s: resign: %v", c.proc, err)
			}
			rcancel()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (c *jobClient) setTerm(t backends.Lease) {
	c.mu.Lock()
	c.term = t
	c.mu.Unlock()
}

// leading is the term the client leads in now, as far as it knows (nil:
// it does not lead).
func (c *jobClient) leading() backends.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term == nil {
		return nil
	}
	select {
	case <-c.term.Lost():
		return nil
	default:
		return c.term
	}
}

// attempt takes one job through the strategy, or waits the think time
// when none is due. With a lock, the attempt begins once the job's lock is
// held: a client that found it busy gave the job up before beginning (its
// acquire is recorded, no attempt).
func (c *jobClient) attempt(ctx context.Context) {
	var lease backends.Lease
	if c.elect {
		// Only the leader takes jobs: its attempts run under its term.
		if lease = c.leading(); lease == nil {
			wait.Sleep(ctx, c.w.Think.Draw(c.r))
			return
		}
	}
	job, err := c.ex.Pick(ctx)
	if err != nil {
		if !errors.Is(err, jobs.ErrNoJob) && ctx.Err() == nil {
			c.lg.Printf("%s: %v", c.proc, err)
		}
		wait.Sleep(ctx, c.w.Think.Draw(c.r))
		return
	}
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
	c.em.emit(c.job(history.Invoke, job, n, ""))
	typ, why := c.steps(ctx, job, n, lease)
	if typ != history.OK {
		c.ex.Abandon(job)
	}
	c.em.emit(c.job(typ, job, n, why))
	if typ != history.OK {
		wait.Sleep(ctx, c.w.Think.Draw(c.r))
	}
}

// steps runs an attempt's steps and returns its outcome: ok, the job
// recorded complete; fail, no effect applied and the job given up; info,
// unknown. A lease (nil without a lock or a term) is released at the end
// when it is the job's lock (a term is the campaign's to end).
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
		stopWatch := func() {
			close(stop)
			watcher.Wait()
		}
		if c.lock {
			defer c.release(ctx, job, lease, markLost, stopWatch)
		} else {
			defer stopWatch()
		}
	}
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
	wait.Sleep(ctx, c.w.Jobs.After.D()) // the work after the effect, before its completion is recorded
	if err := c.ex.Complete(ctx, job); err != nil {
		return history.Info, err.Error()
	}
	return history.OK, ""
}
