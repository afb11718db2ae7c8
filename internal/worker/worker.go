// Package worker is the code of one application instance: a child process
// of bench (`bench worker`) that runs K concurrent clients against a lock
// backend and streams what they do, as history events, to the coordinator.
//
// An instance is a process, not a goroutine, so that a pause fault can
// freeze all of it (its clients and its lock library's keep-alive
// goroutines) the way a stop-the-world GC pause does.
//
// Protocol: the coordinator writes one JSON Config line on stdin, then
// "start" and, later, "stop" lines. The worker writes events as JSON lines
// on stdout: a "ready" mark once it is connected, ticks every TickEvery so
// the coordinator knows how far the instance's clock has got, and every
// operation event. Events leave in time order: each is timestamped and
// written under one mutex. Logs go to stderr.
package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/history"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/resource"
	"github.com/lockbench/lockbench/internal/scenario"
)

// TickEvery is how often an idle worker reports its clock.
const TickEvery = 20 * time.Millisecond

// Control marks a worker sends besides history events.
const (
	MarkReady = "ready" // connected, waiting for start
	MarkTick  = "tick"  // the instance's clock has reached T
)

// Config is everything a worker needs, sent by the coordinator.
type Config struct {
	Base      int64             `json:"base"` // the run's monotonic base
	Instance  int               `json:"instance"`
	Seed      uint64            `json:"seed"`
	Backend   string            `json:"backend"`
	Options   []byte            `json:"options"` // backend options, YAML
	Endpoints map[string]string `json:"endpoints"`
	Resource  string            `json:"resource"` // protected resource address (proxied)
	Workload  scenario.Workload `json:"workload"`
}

// emitter writes events in time order.
type emitter struct {
	mu   sync.Mutex
	base int64
	w    *bufio.Writer
	enc  *json.Encoder
	err  error
}

func newEmitter(w io.Writer, base int64) *emitter {
	bw := bufio.NewWriter(w)
	return &emitter{base: base, w: bw, enc: json.NewEncoder(bw)}
}

// emit timestamps e and writes it; the timestamp is taken under the same
// lock as the write so that the stream is ordered by time.
func (em *emitter) emit(e history.Event) {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.err != nil {
		return
	}
	e.T = monoclock.Since(em.base)
	if err := em.enc.Encode(&e); err != nil {
		em.err = err
		return
	}
	em.err = em.w.Flush()
}

// Run is the body of `bench worker`.
func Run(ctx context.Context, stdin io.Reader, stdout io.Writer, logw io.Writer) error {
	lg := log.New(logw, "", log.Lmicroseconds)
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 0, 64<<10), 4<<20)
	if !in.Scan() {
		return fmt.Errorf("worker: no config on stdin: %v", in.Err())
	}
	var cfg Config
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("worker: config: %w", err)
	}
	em := newEmitter(stdout, cfg.Base)
	w := cfg.Workload
	be, err := backends.New(cfg.Backend, func(v any) error { return config.DecodeStrictBytes(cfg.Options, v, 0) })
	if err != nil {
		return fmt.Errorf("worker %d: %w", cfg.Instance, err)
	}
	shared := backends.NewShared()
	defer func() {
		if err := shared.Close(); err != nil {
			lg.Printf("close shared resources: %v", err)
		}
	}()
	lockers := make([]backends.Locker, w.Clients)
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for c := range lockers {
		env := backends.Env{Endpoints: cfg.Endpoints, TTL: w.TTL.D(), Instance: cfg.Instance, Client: c, Shared: shared}
		if lockers[c], err = be.Open(openCtx, env); err != nil {
			cancel()
			return fmt.Errorf("worker %d client %d: open %s: %w", cfg.Instance, c, cfg.Backend, err)
		}
		defer lockers[c].Close()
	}
	cancel()

	em.emit(history.Event{Type: history.Mark, F: MarkReady, Proc: fmt.Sprintf("i%d", cfg.Instance)})
	tickCtx, stopTicks := context.WithCancel(ctx)
	defer stopTicks()
	go func() {
		t := time.NewTicker(TickEvery)
		defer t.Stop()
		for {
			select {
			case <-tickCtx.Done():
				return
			case <-t.C:
				em.emit(history.Event{Type: history.Mark, F: MarkTick})
			}
		}
	}()

	// Wait for start, then run until stop (or stdin closes).
	for in.Scan() {
		if in.Text() == "start" {
			break
		}
	}
	var stopping atomic.Bool
	go func() {
		for in.Scan() {
			if in.Text() == "stop" {
				break
			}
		}
		stopping.Store(true)
	}()
	var wg sync.WaitGroup
	for c := 0; c < w.Clients; c++ {
		cl := &client{
			proc:   fmt.Sprintf("i%dc%d", cfg.Instance, c),
			w:      w,
			locker: lockers[c],
			res:    resource.NewClient(cfg.Resource, fmt.Sprintf("i%dc%d", cfg.Instance, c)),
			em:     em,
			r:      rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Instance)<<16|uint64(c))),
			lg:     lg,
		}
		cl.keys = scenario.NewKeyPicker(w.Keys, cl.r, c+cfg.Instance)
		if ext, ok := lockers[c].(backends.Extender); ok {
			cl.ext = ext
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.res.Close()
			sleep(ctx, w.StartAfter.D())
			for !stopping.Load() && ctx.Err() == nil {
				cl.cycle(ctx)
			}
		}()
	}
	wg.Wait()
	stopTicks()
	em.mu.Lock()
	defer em.mu.Unlock()
	return em.err
}

type client struct {
	proc   string
	w      scenario.Workload
	locker backends.Locker
	ext    backends.Extender
	res    *resource.Client
	em     *emitter
	r      *rand.Rand
	keys   *scenario.KeyPicker
	lg     *log.Logger
}

func (c *client) ev(typ history.Type, f, key string) history.Event {
	return history.Event{Type: typ, F: f, Proc: c.proc, Key: key}
}

// cycle is one acquire, critical section, release, think.
func (c *client) cycle(ctx context.Context) {
	key := c.keys.Next()
	c.misbehave(ctx, key)
	lease, ok := c.acquire(ctx, key)
	if ok {
		c.critical(ctx, key, lease)
	}
	sleep(ctx, c.w.Think.Draw(c.r))
}

// misbehave, with the workload's probability, releases key with a wrong
// token before trying to acquire it: a client that does not hold the lock
// removing it. A safe backend refuses (fail); an unsafe one accepts (ok),
// and whoever held the key now shares it with the next client.
func (c *client) misbehave(ctx context.Context, key string) {
	f, ok := c.locker.(backends.Forger)
	if !ok || c.w.WrongTokenRelease == 0 || c.r.Float64() >= c.w.WrongTokenRelease {
		return
	}
	c.em.emit(c.ev(history.Invoke, history.OpForeignRelease, key))
	fctx, cancel := context.WithTimeout(ctx, c.w.OpTimeout.D())
	err := c.locker.Release(fctx, f.Forge(key))
	cancel()
	e := c.ev(history.OK, history.OpForeignRelease, key)
	switch {
	case errors.Is(err, backends.ErrNotHeld):
		e.Type, e.Err = history.Fail, err.Error()
	case err != nil:
		e.Type, e.Err = history.Info, err.Error()
	}
	c.em.emit(e)
}

// acquire retries with exponential backoff and jitter until the lock is
// taken, the attempts run out or the acquire timeout passes. The outcome is
// ok, fail (every attempt certainly failed) or info (at least one attempt
// had an unknown outcome: it may have been granted behind a lost reply).
func (c *client) acquire(ctx context.Context, key string) (backends.Lease, bool) {
	c.em.emit(c.ev(history.Invoke, history.OpAcquire, key))
	actx, cancel := context.WithTimeout(ctx, c.w.AcquireTimeout.D())
	defer cancel()
	var lastErr error
	unknown := false
	for n := 0; n < c.w.Retry.Attempts; n++ {
		lease, err := c.locker.Acquire(actx, key)
		if err == nil {
			e := c.ev(history.OK, history.OpAcquire, key)
			e.Token = lease.Token()
			c.em.emit(e)
			return lease, true
		}
		lastErr = err
		if !errors.Is(err, backends.ErrNotAcquired) {
			unknown = true
		}
		if actx.Err() != nil || n == c.w.Retry.Attempts-1 {
			break
		}
		if !sleep(actx, c.w.Retry.Backoff(n, c.r)) {
			break
		}
	}
	typ := history.Fail
	if unknown {
		typ = history.Info
	}
	e := c.ev(typ, history.OpAcquire, key)
	if lastErr == nil {
		lastErr = actx.Err()
	}
	if lastErr != nil {
		e.Err = lastErr.Error()
	}
	c.em.emit(e)
	return nil, false
}

// critical reads the resource, works for the hold time, writes value+1 with
// the lease's token, then releases. A lease reported lost ends the client's
// belief that it holds the lock (a "lost" event) and, with abort_on_lost,
// cancels the work before the write.
func (c *client) critical(ctx context.Context, key string, lease backends.Lease) {
	work, abort := context.WithCancel(ctx)
	defer abort()
	var lostOnce sync.Once
	markLost := func() {
		lostOnce.Do(func() {
			c.em.emit(c.ev(history.OK, history.OpLost, key))
			if c.w.AbortOnLost == nil || *c.w.AbortOnLost {
				abort()
			}
		})
	}
	stopWatch := make(chan struct{})
	var watchers sync.WaitGroup
	if lost := lease.Lost(); lost != nil {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			select {
			case <-lost:
				markLost()
			case <-stopWatch:
			}
		}()
	}
	if c.ext != nil && c.w.AutoExtend.Every > 0 && c.w.AutoExtend.Max > 0 {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			c.autoExtend(lease, stopWatch)
		}()
	}

	opCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, c.w.OpTimeout.D()) }
	rctx, cancel := opCtx()
	rr, err := c.res.Read(rctx, key, lease.Token())
	cancel()
	if err != nil {
		c.lg.Printf("%s: resource read %s: %v", c.proc, key, err)
	} else if sleep(work, c.w.Hold.Draw(c.r)) {
		wctx, cancel := opCtx()
		if _, err := c.res.Write(wctx, key, rr, lease.Token()); err != nil {
			c.lg.Printf("%s: resource write %s: %v", c.proc, key, err)
		}
		cancel()
	} else {
		// The work was abandoned (the lease was lost): tell the resource,
		// so that this client no longer counts as inside its critical
		// section for faults aimed at the holder.
		fctx, cancel := opCtx()
		if err := c.res.Abandon(fctx, key); err != nil {
			c.lg.Printf("%s: resource abandon %s: %v", c.proc, key, err)
		}
		cancel()
	}

	close(stopWatch)
	watchers.Wait()
	checkLost := func() {
		if lost := lease.Lost(); lost != nil {
			select {
			case <-lost:
				markLost()
			default:
			}
		}
	}
	checkLost()
	c.em.emit(c.ev(history.Invoke, history.OpRelease, key))
	rctx, cancel = opCtx()
	err = c.locker.Release(rctx, lease)
	cancel()
	// A signal that arrives while releasing is still recorded: the client
	// no longer believes it holds the lock, but the library did say so.
	checkLost()
	switch {
	case err == nil:
		c.em.emit(c.ev(history.OK, history.OpRelease, key))
	case errors.Is(err, backends.ErrNotHeld):
		e := c.ev(history.Fail, history.OpRelease, key)
		e.Err = err.Error()
		c.em.emit(e)
	default:
		e := c.ev(history.Info, history.OpRelease, key)
		e.Err = err.Error()
		c.em.emit(e)
	}
}

func (c *client) autoExtend(lease backends.Lease, stop <-chan struct{}) {
	t := time.NewTicker(c.w.AutoExtend.Every.D())
	defer t.Stop()
	for n := 0; n < c.w.AutoExtend.Max; n++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		c.em.emit(c.ev(history.Invoke, history.OpExtend, lease.Key()))
		ctx, cancel := context.WithTimeout(context.Background(), c.w.OpTimeout.D())
		err := c.ext.Extend(ctx, lease)
		cancel()
		switch {
		case err == nil:
			c.em.emit(c.ev(history.OK, history.OpExtend, lease.Key()))
		case errors.Is(err, backends.ErrNotHeld):
			e := c.ev(history.Fail, history.OpExtend, lease.Key())
			e.Err = err.Error()
			c.em.emit(e)
			return
		default:
			e := c.ev(history.Info, history.OpExtend, lease.Key())
			e.Err = err.Error()
			c.em.emit(e)
		}
	}
}

// sleep waits d or until ctx is done; it reports whether d fully elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
