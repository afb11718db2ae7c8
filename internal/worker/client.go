package worker

import (
	"context"
	"errors"
	"log"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/resource"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/lockbench/lockbench/internal/workload"
)

type client struct {
	proc   string
	w      workload.Workload
	locker backends.Locker
	// elector is the locker's leader election, where it has one (a job
	// workload's leader strategy campaigns in it).
	elector backends.Elector
	ext     backends.Extender
	// store runs the critical section in the lock's own database instead
	// of the harness's resource (backends.Store).
	store backends.Store
	res   *resource.Client
	em    *emitter
	r     *rand.Rand
	keys  *workload.KeyPicker
	lg    *log.Logger
	// attempts carries, in open-loop mode, when each attempt was due.
	attempts chan int64
}

func (c *client) ev(typ history.Type, f, key string) history.Event {
	return history.Event{Type: typ, F: f, Proc: c.proc, Key: key}
}

// cycle is one acquire, critical section, release, think. intended is
// when an open-loop attempt was due (0 in closed loop, which thinks
// between cycles instead).
func (c *client) cycle(ctx context.Context, intended int64) {
	key := c.keys.Next()
	c.misbehave(ctx, key)
	lease, ok := c.acquire(ctx, key, intended)
	if ok {
		c.critical(ctx, key, lease)
	}
	if intended == 0 {
		wait.Sleep(ctx, c.w.Think.Draw(c.r))
	}
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
	if err != nil {
		e.Type, e.Err = failed(err), err.Error()
	}
	c.em.emit(e)
}

// failed is the outcome of a release, an extension or a wrong-token
// release that returned err (checker/MODEL.md §0 A1): fail when the
// service said the lease was not the caller's, unsent when the request
// surely never left (backends.ErrNotSent), unknown otherwise.
func failed(err error) history.Type {
	switch {
	case errors.Is(err, backends.ErrNotHeld):
		return history.Fail
	case errors.Is(err, backends.ErrNotSent):
		return history.Unsent
	}
	return history.Info
}

// acquire retries with exponential backoff and jitter until the lock is
// taken, the attempts run out or the acquire timeout passes. The outcome is
// ok, info (at least one attempt had an unknown outcome: it may have been
// granted behind a lost reply), fail (every attempt certainly failed, and
// the service refused one) or unsent (no attempt was ever sent).
func (c *client) acquire(ctx context.Context, key string, intended int64) (backends.Lease, bool) {
	inv := c.ev(history.Invoke, history.OpAcquire, key)
	inv.Intended = intended
	c.em.emit(inv)
	actx, cancel := context.WithTimeout(ctx, c.w.AcquireTimeout.D())
	defer cancel()
	var lastErr error
	unknown, refused := false, false
	for n := 0; n < c.w.Retry.Attempts; n++ {
		lease, err := c.locker.Acquire(actx, key)
		if err == nil {
			e := c.ev(history.OK, history.OpAcquire, key)
			e.Token = lease.Token()
			c.em.emit(e)
			return lease, true
		}
		lastErr = err
		switch {
		case errors.Is(err, backends.ErrNotAcquired):
			refused = true
		case errors.Is(err, backends.ErrNotSent):
		default:
			unknown = true
		}
		if actx.Err() != nil || n == c.w.Retry.Attempts-1 {
			break
		}
		if !wait.Sleep(actx, c.w.Retry.Backoff(n, c.r)) {
			break
		}
	}
	typ := history.Fail
	switch {
	case unknown:
		typ = history.Info
	case !refused && lastErr != nil:
		typ = history.Unsent // every attempt was refused before it was sent
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

// resourceError records a failed request to the protected resource.
func (c *client) resourceError(key string, err error) {
	e := c.ev(history.Info, history.OpResource, key)
	e.Err = err.Error()
	c.em.emit(e)
}

// critical reads the resource, works for the hold time, writes value+1 with
// the lease's token, then releases. A lease reported lost ends the client's
// belief that it holds the lock (a "lost" event, stamped when the signal
// fires) and, with abort_on_lost, cancels the work before the write. The
// signal is watched until the release is sent, whatever else the client is
// doing: an extension stuck in a partition is cancelled when the work ends,
// never waited for while the lease runs out.
//
// A critical section with no work (no hold, no resource) has nothing to
// watch or extend: the lease is looked at once, just before the release,
// and no goroutine or context is made for it. That is most of the
// harness's per-cycle cost on a fast lock (make perf).
func (c *client) critical(ctx context.Context, key string, lease backends.Lease) {
	hold := c.w.Hold.Draw(c.r)
	if hold <= 0 && !c.w.UsesResource() {
		var once sync.Once
		c.release(ctx, key, lease, func() { once.Do(func() { c.em.emit(c.ev(history.OK, history.OpLost, key)) }) })
		return
	}
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
	var watcher sync.WaitGroup
	if lost := lease.Lost(); lost != nil {
		watcher.Add(1)
		go func() {
			defer watcher.Done()
			select {
			case <-lost:
				markLost()
			case <-stopWatch:
			}
		}()
	}
	if c.ext != nil && c.w.AutoExtend.Every > 0 && c.w.AutoExtend.Max > 0 {
		extendCtx, stopExtending := context.WithCancel(ctx)
		var extender sync.WaitGroup
		extender.Add(1)
		go func() {
			defer extender.Done()
			c.autoExtend(extendCtx, lease)
		}()
		c.work(ctx, work, key, lease, hold)
		stopExtending()
		extender.Wait()
	} else {
		c.work(ctx, work, key, lease, hold)
	}
	c.release(ctx, key, lease, markLost, func() {
		close(stopWatch)
		watcher.Wait()
	})
}

// release marks the lease lost if its library says so, records the
// release's invocation, runs then (if any: what must end before the
// release is sent), sends the release and records its outcome.
func (c *client) release(ctx context.Context, key string, lease backends.Lease, markLost func(), then ...func()) {
	if lost := lease.Lost(); lost != nil {
		select {
		case <-lost:
			markLost()
		default:
		}
	}
	c.em.emit(c.ev(history.Invoke, history.OpRelease, key))
	for _, f := range then {
		f()
	}
	rctx, cancel := context.WithTimeout(ctx, c.w.OpTimeout.D())
	err := c.locker.Release(rctx, lease)
	cancel()
	if err == nil {
		c.em.emit(c.ev(history.OK, history.OpRelease, key))
		return
	}
	e := c.ev(failed(err), history.OpRelease, key)
	e.Err = err.Error()
	c.em.emit(e)
}

// work is the critical section: read the resource, hold, write. With no
// hold time, read and write go together in one round trip. work is
// cancelled when the lease is reported lost (with abort_on_lost); the
// client then tells the resource it abandoned its work, so that it no
// longer counts as the holder a fault should hit.
func (c *client) work(ctx, work context.Context, key string, lease backends.Lease, hold time.Duration) {
	token := lease.Token()
	if c.store != nil && c.w.UsesResource() {
		c.storeWork(ctx, work, key, lease, hold)
		return
	}
	if !c.w.UsesResource() {
		wait.Sleep(work, hold)
		return
	}
	opCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, c.w.OpTimeout.D()) }
	if hold <= 0 && work.Err() == nil {
		rctx, cancel := opCtx()
		_, _, err := c.res.ReadWrite(rctx, key, token)
		cancel()
		if err != nil {
			c.resourceError(key, err)
		}
		return
	}
	rctx, cancel := opCtx()
	_, err := c.res.Read(rctx, key, token)
	cancel()
	if err != nil {
		c.resourceError(key, err)
		return
	}
	if wait.Sleep(work, hold) && c.stillValid(lease) {
		wctx, cancel := opCtx()
		if _, err := c.res.Write(wctx, key, token); err != nil {
			c.resourceError(key, err)
		}
		cancel()
		return
	}
	fctx, cancel := opCtx()
	if err := c.res.Abandon(fctx, key); err != nil {
		c.resourceError(key, err)
	}
	cancel()
}

// storeWork runs the critical section in the backend's database: read,
// hold, write, reported as one store operation (ok: written, committed by
// the release that follows; fail: nothing written, a conflict or work cut
// short; info: unknown). Each statement is bounded by the op timeout
// around the hold.
func (c *client) storeWork(ctx, work context.Context, key string, lease backends.Lease, hold time.Duration) {
	c.em.emit(c.ev(history.Invoke, history.OpStore, key))
	sctx, cancel := context.WithTimeout(ctx, hold+2*c.w.OpTimeout.D())
	wrote, err := c.store.Work(sctx, lease, func() bool { return wait.Sleep(work, hold) })
	cancel()
	e := c.ev(history.OK, history.OpStore, key)
	switch {
	case errors.Is(err, backends.ErrConflict):
		e.Type, e.Err = history.Fail, history.StoreConflict
	case errors.Is(err, backends.ErrNotSent):
		e.Type, e.Err = history.Unsent, err.Error() // nothing written, nothing said
	case err != nil:
		e.Type, e.Err = history.Info, err.Error()
	case !wrote:
		e.Type, e.Err = history.Fail, "work cut short: nothing written"
	}
	c.em.emit(e)
}

// stillValid is the careful client's last look before it writes: with
// abort_on_lost, a lease its library already knows is lost (a validity
// deadline passed during a pause, say) is not written with, even if the
// signal's watcher has not run yet. The careless client writes anyway.
func (c *client) stillValid(lease backends.Lease) bool {
	if c.w.AbortOnLost != nil && !*c.w.AbortOnLost {
		return true
	}
	if lost := lease.Lost(); lost != nil {
		select {
		case <-lost:
			return false
		default:
		}
	}
	return true
}

// autoExtend extends the lease every AutoExtend.Every, at most
// AutoExtend.Max times, until ctx is cancelled (the work is over): an
// extension in flight is cancelled with it.
func (c *client) autoExtend(ctx context.Context, lease backends.Lease) {
	t := time.NewTicker(c.w.AutoExtend.Every.D())
	defer t.Stop()
	for n := 0; n < c.w.AutoExtend.Max; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		c.em.emit(c.ev(history.Invoke, history.OpExtend, lease.Key()))
		octx, cancel := context.WithTimeout(ctx, c.w.OpTimeout.D())
		err := c.ext.Extend(octx, lease)
		cancel()
		if err == nil {
			c.em.emit(c.ev(history.OK, history.OpExtend, lease.Key()))
			if lost := lease.Lost(); lost != nil {
				select {
				case <-lost:
					return // its library says it is lost: nothing left to extend
				default:
				}
			}
			continue
		}
		typ := failed(err)
		e := c.ev(typ, history.OpExtend, lease.Key())
		e.Err = err.Error()
		c.em.emit(e)
		if typ == history.Fail {
			return
		}
	}
}
