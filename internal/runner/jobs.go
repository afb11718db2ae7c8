package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/lockbench/lockbench/jobs"
)

// This file is a job workload's coordinator side (checker/MODEL.md §20):
// it prepares the effect sink, puts the case's jobs on its list once the
// case has started, and copies the sink's own records of the effects it
// committed into the history as sink-effect marks, as they commit and once
// more after every client stopped. No worker writes those marks: the
// sink's side is the proof of what ran.

// sinkPoll is how often the coordinator reads the sink's new records.
const sinkPoll = 100 * time.Millisecond

// sinkWatch is a case's connection to its effect sink.
type sinkWatch struct {
	cr     *caseRun
	addr   string
	conn   *pgx.Conn // nil after a failure: the next read connects again
	tr     jobs.Tracker
	err    error // the last read's failure: the jobs cannot be judged
	stop   chan struct{}
	wg     sync.WaitGroup
	closed bool
	// pub is the broker of a strategy whose jobs go through one (nil:
	// the sink's job list is the queue).
	pub jobs.Publication
}

// prepareSink makes the sink's tables and clears the case's rows, before
// any worker starts; nil for a case without jobs.
func (cr *caseRun) prepareSink(ctx context.Context) (*sinkWatch, error) {
	if cr.c.Strategy == nil {
		return nil, nil
	}
	addr, ok := cr.cl.Endpoints()[jobs.SinkServer]
	if !ok {
		return nil, fmt.Errorf("jobs: the cluster has no %s for the effect sink", jobs.SinkServer)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := jobs.Connect(pctx, addr, cr.sinkCreds())
	if err != nil {
		return nil, err
	}
	if err := jobs.Prepare(pctx, conn, cr.keyPrefix()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	s := &sinkWatch{cr: cr, addr: addr, conn: conn, tr: jobs.Tracker{Prefix: cr.keyPrefix()}}
	if p, ok := cr.c.Strategy.(jobs.Publisher); ok {
		if s.pub, err = p.OpenPublisher(pctx, cr.cl.Endpoints(), cr.keyPrefix()); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
		cr.cl.SettlePower() // the queue is the deployment's, not the case's writes
	}
	return s, nil
}

// start publishes the jobs (due from now, the case having started) and
// reads the sink's records every sinkPoll.
func (s *sinkWatch) start(ctx context.Context) error {
	j := s.cr.c.Workload.Jobs
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := jobs.Publish(pctx, s.conn, s.cr.keyPrefix(), j.Count, j.Every.D())
	cancel()
	if err != nil {
		return err
	}
	s.stop = make(chan struct{})
	if s.pub != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.publish(ctx, j.Count, j.Every.D())
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(sinkPoll)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				// Not cancelled mid-query: pgx closes a connection whose
				// query a context cancelled.
				s.read(context.WithoutCancel(ctx), false)
			}
		}
	}()
	return nil
}

// publishRetry is how long the coordinator waits before it publishes a
// job again after a publish failed (the broker down, paused or cut off).
const publishRetry = 50 * time.Millisecond

// publish puts job n on the broker at its due time (n×every after now,
// the time the sink's list was given), each until the broker confirms
// it: a producer that retries, as at-least-once asks (the broker's dedup
// window, where it has one, drops a repeat of a publish that had landed).
// A job still unconfirmed when the case stops was never published: it is
// lost, as it would be for the application.
func (s *sinkWatch) publish(ctx context.Context, count int, every time.Duration) {
	began := time.Now()
	retries := 0
	var last error
	defer func() {
		if retries > 0 {
			fmt.Fprintf(s.cr.r.log, "  jobs: %d publish(es) retried (the last failure: %v)\n", retries, last)
		}
	}()
	for n := 0; n < count; n++ {
		if d := time.Until(began.Add(time.Duration(n) * every)); d > 0 {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		for {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err := s.pub.Publish(pctx, fmt.Sprintf("j%d", n))
			cancel()
			if err == nil {
				break
			}
			retries, last = retries+1, err
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(publishRetry):
			}
		}
	}
}

// read copies the records committed since the last read into the history;
// all reads every record of the case (the last read). A failure is kept
// (the last read's says whether the record is whole) and the connection
// made again at the next read: a sink that a fault paused answers later.
func (s *sinkWatch) read(ctx context.Context, all bool) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.conn == nil || s.conn.IsClosed() {
		conn, err := jobs.Connect(rctx, s.addr, s.cr.sinkCreds())
		if err != nil {
			s.err = err
			return
		}
		s.conn = conn
	}
	recs, err := s.tr.Next(rctx, s.conn, all)
	s.err = err
	if err != nil {
		s.conn.Close(context.Background())
		s.conn = nil
		return
	}
	for _, r := range recs {
		s.cr.r.m.emit(r.Event())
	}
}

// graceAfterHeal waits out the grace after the last heal (a job that a fault held
// back has that long to get its effect).
func (s *sinkWatch) graceAfterHeal(ctx context.Context) {
	s.cr.liveMu.Lock()
	last := s.cr.lastHeal
	s.cr.liveMu.Unlock()
	if last == 0 {
		return
	}
	if more := time.Duration(last + int64(s.cr.c.Workload.Jobs.Grace) - monoclock.Since(s.cr.r.base)); more > 0 {
		fmt.Fprintf(s.cr.r.log, "  jobs: running %s more, the grace after the last heal\n", more.Round(time.Millisecond))
		wait.Sleep(ctx, more)
	}
}

// close stops the polling, reads every record of the case once more (no
// client runs any more) and records a failure of that read in the
// harness's stats: the case's jobs cannot then be judged.
func (s *sinkWatch) close(ctx context.Context) {
	if s.closed {
		return
	}
	s.closed = true
	if s.stop != nil {
		close(s.stop)
		s.wg.Wait()
	}
	if s.pub != nil {
		s.pub.Close()
	}
	for try := 0; try < 3; try++ {
		if s.read(context.WithoutCancel(ctx), true); s.err == nil {
			break
		}
	}
	if s.err != nil {
		s.cr.stats.SinkError = s.err.Error()
	}
	if s.conn != nil {
		s.conn.Close(context.Background())
		s.conn = nil
	}
}

// sinkCreds are the credentials of a sink lockbench did not start (nil:
// its own).
func (cr *caseRun) sinkCreds() *backends.Credentials {
	if t := cr.r.sc.Targets; t != nil {
		return t.Auth["postgres"]
	}
	return nil
}
