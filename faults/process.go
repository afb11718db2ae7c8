package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/wait"
)

// Process faults act on a whole process group: a worker instance (all its
// clients and the lease keep-alive goroutines of its lock library, like a
// stop-the-world GC pause) or a server.

func init() {
	Register(Info{Name: "pause",
		Example:  Example{Backend: "redis", Fault: "{type: pause, target: holder}"},
		Does:     "SIGSTOP the process group for the window, then SIGCONT: a GC-like pause of a whole instance, lease keep-alives included; `failover: true` requires another server to take over",
		Observed: "every process of the group is in state T (from /proc), and running again after the heal",
		Effect:   history.EffectStop,
		Action:   ActSignal, Claims: []string{ClaimProcess}, Options: PauseOptions{}, Classes: map[Kind]string{Instance: history.ClassPause, Server: history.ClassPauseSrv}, Summary: "SIGSTOP an instance or server for the window, then SIGCONT (a GC-like pause)", Targets: []Kind{Instance, Server}, New: newPause})
	Register(Info{Name: "kill",
		Example:  Example{Backend: "redis", Fault: "{type: kill, target: redis-1}"},
		Does:     "SIGKILL; a server restarts (same address, data dir and persistence mode) when the window ends (`restart: false` keeps it down); an instance stays dead. May have a zero window; `failover: true` requires another server to take over before the window ends",
		Observed: "the process exited; the restarted server answers; a take-over by a new leader or master is recorded when seen",
		Effect:   history.EffectKill,
		Action:   ActKill, Claims: []string{ClaimProcess}, Options: KillOptions{}, Classes: map[Kind]string{Instance: history.ClassCrash, Server: history.ClassKill}, LeaderClass: history.ClassKillLead, Summary: "SIGKILL an instance or server; a server restarts when the window ends", Targets: []Kind{Instance, Server}, Instant: true, Lasting: true, New: newKill})
}

// stopWait bounds how long a signal may take to show its effect.
const stopWait = 2 * time.Second

type pause struct{ leaderWatch }

// PauseOptions configure the pause fault.
type PauseOptions struct {
	// Failover: the fault must make another server take over as leader or
	// master before it heals (observed), or the case is invalid.
	Failover bool `yaml:"failover" doc:"another server must take over as leader or master before the heal (observed)"`
}

func newPause(decode Decoder) (Fault, error) {
	var o PauseOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	return pause{leaderWatch{require: o.Failover}}, nil
}

func (p pause) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	watch := p.watch(ctx, env, target)
	began := time.Now()
	if err := env.Signal(target, syscall.SIGSTOP); err != nil {
		watch.stop()
		return nil, err
	}
	stopped, err := wait.Until(ctx, 5*time.Millisecond, stopWait, func() (bool, error) { return env.Stopped(target) })
	if err != nil || !stopped {
		watch.stop()
		env.Signal(target, syscall.SIGCONT) // best effort: do not leave it half stopped
		return nil, fmt.Errorf("SIGSTOP sent, but %s was not seen stopped within %s (%v)", target, stopWait, err)
	}
	eff := &Effect{Seen: fmt.Sprintf("every process of %s stopped", target), Check: watch.check}
	resume := func(ctx context.Context) (string, error) {
		if err := env.Signal(target, syscall.SIGCONT); err != nil {
			if !errors.Is(err, ErrGone) {
				return "", err
			}
			// The process exited while stopped. Only a kill of the case
			// ended the stop inside this window (checker/MODEL.md §10);
			// any other exit is a process the harness lost, which the
			// scenario did not take away: the heal failed (A8).
			killer := ""
			if kr, ok := env.(KillRecord); ok {
				killer = kr.KilledBy(target, began)
			}
			if killer == "" {
				return "", fmt.Errorf("%s exited while stopped, and no kill of this case ended it: the harness lost a process the scenario did not take away (%w)", target, err)
			}
			eff.EndedBy = killer
			return fmt.Sprintf("%s was killed by %s while stopped: nothing left stopped", target, killer), nil
		}
		running, err := wait.Until(ctx, 5*time.Millisecond, stopWait, func() (bool, error) {
			s, err := env.Stopped(target)
			return !s, err
		})
		if err != nil || !running {
			return "", fmt.Errorf("SIGCONT sent, but %s still looks stopped (%v)", target, err)
		}
		return "resumed", nil
	}
	if left := holderLeft(env, target); left != "" {
		watch.stop()
		if _, err := resume(ctx); err != nil {
			return nil, fmt.Errorf("%s; resuming it: %w", left, err)
		}
		return nil, &RoleLeftError{Msg: left}
	}
	eff.Heal = resume
	return eff, nil
}

// holderLeft says, for a pause of an instance resolved from the holder
// role (or holder-of), why the instance it stopped holds nothing ("" when
// a client of it is still inside its critical section, or when the pause
// is not of a holder): a client can finish its critical section between
// the role's resolution and the SIGSTOP, and the pause would then stop an
// instance that holds nothing. The instance is stopped, so what it had
// sent before the stop is given a moment to arrive before the critical
// sections are looked at.
func holderLeft(env Env, target Target) string {
	rk, ok := env.(RoleKeeper)
	if !ok || target.Kind != Instance || (target.From != RoleHolder && !strings.HasPrefix(target.From, RoleHolderOf)) {
		return ""
	}
	time.Sleep(holderSettle)
	if rk.Plays(target) {
		return ""
	}
	return target.String() + " had left its critical section when it stopped"
}

// holderSettle is how long a stopped holder's last messages are given to
// arrive before its critical section is looked at.
const holderSettle = 20 * time.Millisecond

// KillOptions configure the kill fault.
type KillOptions struct {
	// Restart a killed server when the window ends (default true). An
	// instance is never restarted.
	Restart *bool `yaml:"restart" doc:"restart a killed server when the window ends (default true; instances never restart)"`
	// Failover: killing the target must make another server take over as
	// leader or master before the window ends (observed), or the case is
	// invalid. Without it, a change of leader is recorded when seen.
	Failover bool `yaml:"failover" doc:"another server must take over as leader or master before the heal (observed)"`
}

type kill struct {
	restart bool
	leaderWatch
}

func newKill(decode Decoder) (Fault, error) {
	var o KillOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	return kill{restart: o.Restart == nil || *o.Restart, leaderWatch: leaderWatch{require: o.Failover}}, nil
}

func (k kill) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	watch := k.watch(ctx, env, target)
	start := time.Now()
	if err := env.Kill(target); err != nil {
		watch.stop()
		return nil, err
	}
	eff := &Effect{Seen: fmt.Sprintf("%s exited %s after SIGKILL", target, time.Since(start).Round(time.Millisecond)), Check: watch.check, Heal: noHeal}
	if target.Kind == Server && k.restart {
		eff.Heal = func(ctx context.Context) (string, error) {
			begin := time.Now()
			if err := env.Restart(ctx, target); err != nil {
				return "", fmt.Errorf("restart %s: %w", target, err)
			}
			return fmt.Sprintf("restarted, answering after %s", time.Since(begin).Round(time.Millisecond)), nil
		}
	}
	return eff, nil
}

// leaderWatch observes, for a fault on a server, whether another server
// took over as leader or master while the fault was in force.
type leaderWatch struct{ require bool }

type watching struct {
	require bool
	target  Target
	was     string // the leader when the fault began ("" if unknown)
	begin   time.Time
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	next    string
	after   time.Duration
}

// watch starts watching the leader when target is a server of a cluster
// that has one; check then reports the take-over.
func (w leaderWatch) watch(ctx context.Context, env Env, target Target) *watching {
	ws := &watching{require: w.require, target: target, begin: time.Now(), done: make(chan struct{})}
	if target.Kind != Server {
		return ws
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	ws.was, _ = env.Leader(lctx) // no leader kind, or none now: nothing to watch
	cancel()
	if ws.was != target.Name {
		return ws
	}
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ws.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			l, err := env.Leader(lctx)
			cancel()
			if err == nil && l != "" && l != target.Name {
				ws.mu.Lock()
				ws.next, ws.after = l, time.Since(ws.begin)
				ws.mu.Unlock()
				return
			}
		}
	}()
	return ws
}

func (ws *watching) stop() {
	select {
	case <-ws.done:
	default:
		close(ws.done)
	}
	ws.wg.Wait()
}

func (ws *watching) check(context.Context) (string, error) {
	ws.stop()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case ws.next != "":
		return fmt.Sprintf("%s took over from %s %s after the fault began", ws.next, ws.target, ws.after.Round(time.Millisecond)), nil
	case ws.require && ws.was != ws.target.Name:
		return "", fmt.Errorf("a failover was required, but %s was not the leader when the fault began (the leader was %q)", ws.target, ws.was)
	case ws.require:
		return "", fmt.Errorf("no failover: %s was the leader and no other server took over before the fault healed", ws.target)
	case ws.was == ws.target.Name:
		return fmt.Sprintf("%s was the leader; no other server took over while the fault was in force", ws.target), nil
	}
	return "", nil
}
