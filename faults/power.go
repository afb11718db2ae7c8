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
// writes (internal/machinery/powerfs); the fault kills the server, discards them and,
// when the window ends, starts it again on what was durable. Redis with
// appendfsync everysec, etcd with --unsafe-no-fsync, ZooKeeper with
// forceSync=no and PostgreSQL with synchronous_commit=off acknowledge
// writes that a power loss takes back: a lock granted in the last moment
// vanishes, a fencing counter goes back. The fault is seen when the server
// exited and the layer discarded what was pending (0 bytes is an
// observation: everything had been fsynced); heal sees it answer again.
func init() {
	Register(Info{Name: "power-loss",
		Example:  Example{Backend: "redis", Fault: "{type: power-loss, target: redis-1}"},
		Does:     "a power loss, not a process death: the server is SIGKILLed and every write it made and never fsynced is discarded, then it restarts on what was durable when the window ends. A case with a `power-loss` runs every server's data dir on a FUSE layer (`internal/machinery/powerfs`, on go-fuse) that keeps an undo record per write until the file's fsync (Jepsen's LazyFS `lose-unfsynced-writes`); metadata (create, rename, unlink) is durable at once, and what a server wrote until it first answered counts as durable (a machine's writeback would have flushed it). A target set (`target: [etcd-1, etcd-2, etcd-3]` or `etcd-*`) loses power member by member, one right after another, and its members restart together. The fsync switches: Redis `persistence: everysec`/`always`, etcd `unsafe_no_fsync: true`, ZooKeeper `force_sync: false`. Every server write of such a case goes through the layer (a FUSE round trip and an undo record), so compare its latencies only with cases that have the layer too",
		Observed: "the server exited and the layer discarded what was pending (the bytes are recorded; 0 bytes means everything had been fsynced); at heal, it answers again",
		Effect:   history.EffectPowerLoss,
		Action:   ActPowerLoss, Claims: []string{ClaimProcess}, Classes: map[Kind]string{Server: history.ClassPower},
		Summary: "kill a server and discard every write it never fsynced (its data dir is on a FUSE layer); it restarts on what was durable when the window ends",
		Targets: []Kind{Server}, Instant: true, Lasting: true, NeedsFuse: true, New: newPowerLoss})
}

// PowerCutter is implemented by Envs whose servers' data dirs are on a
// power-loss layer: PowerLoss kills the server and discards the writes it
// never fsynced, and says how many bytes in how many files.
type PowerCutter interface {
	PowerLoss(server Target) (bytes int64, files int, err error)
}

type powerLoss struct{}

func newPowerLoss(decode Decoder) (Fault, error) {
	if err := decode(&struct{}{}); err != nil {
		return nil, err
	}
	return powerLoss{}, nil
}

func (powerLoss) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
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

// disk-full makes a server's data dir a full disk for the window: every
// write, allocation and creation there fails with ENOSPC (the same layer
// as power-loss). What the server does is its own: Redis refuses writes
// while its AOF cannot be written (MISCONF), etcd raises its NOSPACE
// alarm, PostgreSQL cannot write its WAL; a lock may become unavailable,
// or a release fail and the lock stay held until its TTL. The fault is
// seen when the disk is full and observed when it refused a write while
// in force (a server that wrote nothing meanwhile was not affected: idle);
// heal frees it.
func init() {
	Register(Info{Name: "disk-full",
		Example:  Example{Backend: "redis", Fault: "{type: disk-full, target: redis-1}"},
		Does:     "the server's data dir (on the same FUSE layer as `power-loss`) answers every write, allocation and creation with ENOSPC for the window, then is freed. What follows is the server's: Redis with `everysec` refuses writes (`MISCONF Errors writing to the AOF file: No space left on device`) and takes them again once its AOF write succeeds; with `always` it exits (\"Can't recover from AOF write error\"), and the fault does not restart it",
		Observed: "the layer refused a write while in force (a server that wrote nothing meanwhile makes the fault idle); at heal, the disk is free",
		Action:   ActDiskFull, Classes: map[Kind]string{Server: history.ClassDiskFull},
		Summary: "make a server's data dir a full disk (every write fails with ENOSPC) for the window, then free it",
		Targets: []Kind{Server}, NeedsFuse: true, New: newDiskFull})
}

// DiskFiller is implemented by Envs whose servers' data dirs are on the
// disk layer: DiskFull fills or frees a server's disk and returns the
// writes refused since the last call; DiskRefused counts them so far.
type DiskFiller interface {
	DiskFull(server Target, full bool) (refused int64, err error)
	DiskRefused(server Target) (int64, error)
}

type diskFull struct{}

func newDiskFull(decode Decoder) (Fault, error) {
	if err := decode(&struct{}{}); err != nil {
		return nil, err
	}
	return diskFull{}, nil
}

func (diskFull) Start(ctx context.Context, env Env, target Target) (*Effect, error) {
	df, ok := env.(DiskFiller)
	if !ok {
		return nil, fmt.Errorf("disk-full: this deployment cannot put %s's data dir on a disk layer", target)
	}
	if _, err := df.DiskFull(target, true); err != nil {
		return nil, err
	}
	return &Effect{
		Seen: fmt.Sprintf("%s's data dir answers every write with ENOSPC", target),
		Check: func(ctx context.Context) (string, error) {
			n, err := df.DiskRefused(target)
			switch {
			case err != nil:
				return "", err
			case n == 0:
				return "", &IdleError{Msg: fmt.Sprintf("%s wrote nothing to its full disk while the fault was in force", target)}
			}
			return fmt.Sprintf("the full disk refused %d writes of %s", n, target), nil
		},
		Heal: func(ctx context.Context) (string, error) {
			n, err := df.DiskFull(target, false)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("disk freed (%d writes refused in all)", n), nil
		},
	}, nil
}
