package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Ping asks the driver for an answer that involves no library call, and
// returns how long it took: the protocol's own round trip.
func (p *Process) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	a, err := p.call(ctx, Request{Type: TypePing})
	if err != nil {
		return 0, err
	}
	if a.reply.Type != TypeOK {
		return 0, fmt.Errorf("driver %s: ping answered with %s: %s", p.cfg.Name, a.reply.Code, p.redact.Redact(a.reply.Message))
	}
	return time.Since(start), nil
}

// BareResult is what a driver's bare loop did.
type BareResult struct {
	Cycles, Errors int64
	Seconds        float64
	// CPU is the driver process's CPU time (user and system).
	CPU time.Duration
}

// RunBare starts a driver for its library's own loop (cfg.Hello.Bare set)
// and waits for the loop's result.
func RunBare(ctx context.Context, cfg Config) (BareResult, error) {
	if cfg.Hello.Bare == nil {
		return BareResult{}, errors.New("RunBare: no bare loop in the hello")
	}
	p, err := Start(ctx, cfg)
	if err != nil {
		return BareResult{}, err
	}
	defer p.Close()
	if !p.Abilities().Bare {
		return BareResult{}, fmt.Errorf("driver %s has no bare loop (its hello's abilities.bare is false)", cfg.Name)
	}
	wait := time.Duration(cfg.Hello.Bare.Seconds*float64(time.Second)) + 30*time.Second
	select {
	case r := <-p.bareCh:
		p.Close()
		res := BareResult{Cycles: *r.Cycles, Seconds: *r.Seconds}
		if r.Errors != nil {
			res.Errors = *r.Errors
		}
		if st := p.cmd.ProcessState; st != nil {
			res.CPU = st.UserTime() + st.SystemTime()
		}
		return res, nil
	case <-p.broken:
		return BareResult{}, p.Err()
	case <-time.After(wait):
		return BareResult{}, fmt.Errorf("driver %s: its bare loop of %.0fs gave no result within %s", cfg.Name, cfg.Hello.Bare.Seconds, wait)
	case <-ctx.Done():
		return BareResult{}, ctx.Err()
	}
}

// closeWait is how long a driver has to exit once its stdin closes.
const closeWait = 5 * time.Second
