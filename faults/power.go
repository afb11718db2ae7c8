package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/history"
)

// power-loss is what a kill is not: the server dies and so does every
// write it made that no fsync had made durable (Jepsen's LazyFS fault,
// lose-unfsynced-writes). Its data dir is on a layer that remembers those
// writes (internal/powerfs); the fault kills the server, discards them and,
// when the window ends, starts it again on what was durable. Redis with
// appendfsync everysec, etcd with --unsafe-no-fsync, ZooKeeper with
// forceSync=no and PostgreSQL with synchronous_commit=off acknowledge
// writes that a power loss takes back: a lock granted in the last moment
// vanishes, a fencing counter goes back. The fault is seen when the server
// exited and the layer discarded what was pending (0 bytes is an
// observation: everything had been fsynced); heal sees it answer again.
func init() {
	Register(Info{Name: "power-loss", Classes: map[Kind]string{Server: history.ClassPower},
		Summary: "kill a server and discard every write it never fsynced (its data dir is on a FUSE layer); it restarts on what was durable when the window ends",
		Targets: []Kind{Server}, Instant: true, Lasting: true, NeedsFuse: true, New: newPowerLoss})
}

// PowerCutter is implemented by Envs whose servers' data dirs are on a
// power-loss layer: PowerLoss kills the server and discards the writes it
// never fsynced, and says how many bytes in how many files.
type PowerCutter interface {
	PowerLoss(server string) (bytes int64, files int, err error)
}

type powerLoss struct{}

func newPowerLoss(decode Decoder) (Fault, error) {
	if err := decode(&struct{}{}); err != nil {
		return nil, err
	}
	return powerLoss{}, nil
}

func (powerLoss) Start(ctx context.Context, env Env, target string) (*Effect, error) {
	pc, ok := env.(PowerCutter)
	if !ok {
		return nil, fmt.Errorf("power-loss: this deployment cannot put %s's data dir on a power-loss layer", target)
	}
	start := time.Now()
	bytes, files, err := pc.PowerLoss(target)
	if err != nil {
		return nil, err
	}
	seen := fmt.Sprintf("%s lost power after %s: %d bytes never fsynced were discarded", target, time.Since(start).Round(time.Millisecond), bytes)
	if files > 0 {
		seen += fmt.Sprintf(" from %d files", files)
	}
	return &Effect{Seen: seen, Heal: func(ctx context.Context) (string, error) {
		begin := time.Now()
		if err := env.Restart(ctx, target); err != nil {
			return "", fmt.Errorf("restart %s on what was durable: %w", target, err)
		}
		return fmt.Sprintf("restarted on what was durable, answering after %s", time.Since(begin).Round(time.Millisecond)), nil
	}}, nil
}
