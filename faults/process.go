package faults

import (
	"context"
	"fmt"
	"syscall"
)

// Process faults act on a whole process group: a worker instance (all its
// clients and the lease keep-alive goroutines of its lock library, like a
// stop-the-world GC pause) or a server.

func init() {
	Register(Info{Name: "pause", Summary: "SIGSTOP an instance or server for the window, then SIGCONT (a GC-like pause)", Targets: []Kind{Instance, Server}, New: newPause})
	Register(Info{Name: "kill", Summary: "SIGKILL an instance or server; a server restarts when the window ends", Targets: []Kind{Instance, Server}, Instant: true, New: newKill})
}

type pause struct{}

func newPause(decode Decoder) (Fault, error) {
	var none struct{}
	if err := decode(&none); err != nil {
		return nil, err
	}
	return pause{}, nil
}

func (pause) Start(ctx context.Context, env Env, target string) (Heal, error) {
	if err := env.Signal(target, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	return func(context.Context) error { return env.Signal(target, syscall.SIGCONT) }, nil
}

// KillOptions configure the kill fault.
type KillOptions struct {
	// Restart a killed server when the window ends (default true). An
	// instance is never restarted.
	Restart *bool `yaml:"restart"`
}

type kill struct{ restart bool }

func newKill(decode Decoder) (Fault, error) {
	var o KillOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	return kill{restart: o.Restart == nil || *o.Restart}, nil
}

func (k kill) Start(ctx context.Context, env Env, target string) (Heal, error) {
	if err := env.Kill(target); err != nil {
		return nil, err
	}
	if KindOf(target) == Instance || !k.restart {
		return func(context.Context) error { return nil }, nil
	}
	return func(ctx context.Context) error {
		if err := env.Restart(ctx, target); err != nil {
			return fmt.Errorf("restart %s: %w", target, err)
		}
		return nil
	}, nil
}
