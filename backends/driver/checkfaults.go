package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// This file holds the conformance check's steps that need the lease to
// run out or the links to be cut: expiry, unknown outcomes, the lost
// signal, and a clean exit that leaves no process behind.

// expiry: a lease that runs out while its holder keeps quiet; another
// client then takes the lock, and the first one's release (and extension)
// must be refused, not remove the second one's lock.
func (c *checker) expiry(ctx context.Context) (string, error) {
	if c.lease <= 0 || c.o.Backend.RenewsInBackground() {
		return "", errSkip{"the lease does not run out while its holder is connected (no lease, or the library renews it)"}
	}
	l0, err := c.take(ctx, 0, "check-e", 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("client 0 could not take a free lock: %w", err)
	}
	time.Sleep(c.lease + 500*time.Millisecond)
	l1, err := c.take(ctx, 1, "check-e", 5*time.Second)
	if err != nil {
		return "", withFix(fmt.Errorf("client 0's lease of %s ran out, but client 1 could not take the lock: %w", c.lease, err), c.leaseFix())
	}
	defer c.give(ctx, 1, l1)
	var notes []string
	if ext, ok := c.l[0].(backends.Extender); ok {
		ectx, cancel := c.opCtx(ctx, 5*time.Second)
		err := ext.Extend(ectx, l0)
		cancel()
		switch {
		case err == nil:
			notes = append(notes, "the holder's extension after its lease ran out was answered ok (the library reports no error)")
		case errors.Is(err, backends.ErrNotHeld):
		default:
			return "", fmt.Errorf("client 0's extension of its expired lease: %w", err)
		}
	}
	err = c.give(ctx, 0, l0)
	switch {
	case err == nil:
		notes = append(notes, "the holder's release after its lease ran out was answered ok: its library does not check that it still held the lock")
	case errors.Is(err, backends.ErrNotHeld):
	default:
		return "", fmt.Errorf("client 0's release of its expired lease: %w", err)
	}
	// Client 1 must still hold it.
	if l, _, err := c.tryOnce(ctx, 0, "check-e"); err == nil {
		c.give(ctx, 0, l)
		return "", errors.New("after client 0's late release, client 0 could take the lock client 1 holds: the late release removed another holder's lock")
	}
	if len(notes) > 0 {
		return "note: " + strings.Join(notes, "; "), nil
	}
	return fmt.Sprintf("after %s, client 1 took the lock; client 0's late release was refused (not_held)", c.lease), nil
}

// unknownOutcome cuts every link (the relays swallow everything) and
// asks for a lock: the driver must answer within the timeout, and since
// its request may have reached the server, with an unknown outcome.
func (c *checker) unknownOutcome(ctx context.Context) (string, error) {
	const timeout = 1500 * time.Millisecond
	for _, r := range c.rs.All() {
		r.Blackhole()
	}
	start := time.Now()
	l, err := c.take(ctx, 0, "check-u", timeout)
	took := time.Since(start)
	// The client's next request queues behind the library call that is
	// still stuck: it too must be answered within its timeout.
	var l2 backends.Lease
	var err2 error
	if err != nil {
		l2, err2 = c.take(ctx, 0, "check-u2", timeout)
	}
	for _, r := range c.rs.All() {
		r.Heal()
	}
	var broken *BrokenError
	switch {
	case errors.As(err, &broken):
		return "", err
	case err == nil:
		c.give(ctx, 0, l)
		return "", errors.New("the acquire was answered ok while every link to the servers was cut")
	case errors.Is(err, backends.ErrNotAcquired):
		return "", fmt.Errorf("with every link cut, the acquire was answered as surely not taken (%s); its request may have reached the server, so the effect must be unknown", short(err))
	}
	switch {
	case errors.As(err2, &broken):
		return "", fmt.Errorf("a second acquire by the same client, behind the stuck one: %w", err2)
	case err2 == nil:
		c.give(ctx, 0, l2)
		return "", errors.New("a second acquire, with every link still cut, was answered ok")
	case errors.Is(err2, backends.ErrNotAcquired):
		return "", fmt.Errorf("a second acquire, with every link still cut, was answered as surely not taken (%s): the effect must be unknown", short(err2))
	}
	rec, rerr := c.recover(ctx)
	if rerr != nil {
		return "", rerr
	}
	late := ""
	if took > timeout+50*time.Millisecond {
		late = fmt.Sprintf(", %s past its timeout (within the grace)", (took - timeout).Round(time.Millisecond))
	}
	return fmt.Sprintf("answered in %s%s: %s; the client's next acquire, queued behind it, answered in time too; usable again %s after the link healed", took.Round(time.Millisecond), late, short(err), rec.Round(time.Millisecond)), nil
}

// recover waits until client 0 can take and give back a lock again.
func (c *checker) recover(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	var last error
	for time.Since(start) < 30*time.Second {
		l, err := c.take(ctx, 0, "check-r", 2*time.Second)
		if err == nil {
			if err := c.give(ctx, 0, l); err != nil {
				last = err
				continue
			}
			return time.Since(start), nil
		}
		var broken *BrokenError
		if errors.As(err, &broken) {
			return 0, err
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return 0, fmt.Errorf("the driver did not take a lock again within 30s of the link healing (last: %v)", last)
}

// lostSignal cuts the links of a lock's holder for longer than its lease:
// a driver with a lost signal must say the lease is gone.
func (c *checker) lostSignal(ctx context.Context) (string, error) {
	if !c.ab.Lost {
		return "", errSkip{"the driver has no lost signal"}
	}
	if c.lease <= 0 {
		return "", errSkip{"no lease to lose (lease: none)"}
	}
	l, err := c.take(ctx, 0, "check-l", 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("client 0 could not take a free lock: %w", err)
	}
	lost := l.Lost()
	if lost == nil {
		return "", errors.New("the driver said it has a lost signal, but the lease has none")
	}
	cut := c.lease + time.Second
	for _, r := range c.rs.All() {
		r.Blackhole()
	}
	start := time.Now()
	select {
	case <-lost:
	case <-time.After(cut):
	}
	for _, r := range c.rs.All() {
		r.Heal()
	}
	wait := c.lease + 15*time.Second
	select {
	case <-lost:
	case <-time.After(wait):
		return "", withFix(fmt.Errorf("the links were cut for %s (the lease is %s) and healed, and no lost came within %s after", cut, c.lease, wait),
			c.leaseFix()+"; a library that never says its lease is gone has no lost ability: its hello must say lost: false")
	case <-c.p.Broken():
		return "", c.p.Err()
	}
	after := time.Since(start)
	rctx, cancel := c.opCtx(ctx, 5*time.Second)
	err = c.l[0].Release(rctx, l)
	cancel()
	var oe *OpError
	if errors.As(err, &oe) && oe.Code == CodeBadRequest {
		return "", fmt.Errorf("after its lost, the lease's release was answered %s: a driver must keep a lease it said was lost until lockbench releases it (the library may need the release: a reentrant mutex does)", short(err))
	}
	rec, err := c.recover(ctx)
	if err != nil {
		return "", err
	}
	when := fmt.Sprintf("%s after the cut began", after.Round(time.Millisecond))
	if after < cut {
		when += ", while it lasted"
	} else {
		when += fmt.Sprintf(", %s after it healed", (after - cut).Round(time.Millisecond))
	}
	return fmt.Sprintf("links cut for %s (lease %s): lost came %s; usable again %s later", cut, c.lease, when, rec.Round(time.Millisecond)), nil
}

func (c *checker) shutdown() (string, error) {
	var errs []string
	for _, p := range c.procs {
		start := time.Now()
		if err := p.Close(); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if pids := Leftovers(p.Tag()); len(pids) > 0 {
			errs = append(errs, fmt.Sprintf("processes %v of the driver are still running after it exited", pids))
		}
		_ = start
	}
	if len(errs) > 0 {
		return "", errors.New(strings.Join(errs, "; "))
	}
	return "exited when its stdin closed; no process of it is left", nil
}

// Leftovers lists the processes whose environment carries a driver's tag.
func Leftovers(tag string) []int {
	want := []byte(EnvTag + "=" + tag + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), string(want)) {
			out = append(out, pid)
		}
	}
	return out
}
