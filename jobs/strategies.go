package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
)

// LockOptions are the lock strategy's options.
type LockOptions struct {
	Fenced   bool `yaml:"fenced" doc:"the effect carries the lock's fencing token and the sink refuses one below the highest it applied for the job (needs a backend that issues tokens)"`
	Register bool `yaml:"register" doc:"register the result: check, under the lock, that the job is not recorded complete before its effect"`
}

// VisibilityOptions are skip-locked-visibility's options.
type VisibilityOptions struct {
	Visibility config.Duration `yaml:"visibility" doc:"how long a taken job stays invisible to the others before the queue hands it out again (default 500ms)"`
}

func init() {
	Register(Info{Name: "lock", Lock: true, Family: "lock", Options: LockOptions{},
		Summary: "the case's lock around each job (key: the job's id), the job list read outside it; the effect unfenced, fenced by the lock's token, or after a completion record checked under the lock",
		New: func(decode backends.Decoder) (Strategy, error) {
			var o LockOptions
			if err := decode(&o); err != nil {
				return nil, err
			}
			return lockStrategy{o}, nil
		}})
	Register(Info{Name: "no-lock", Unsafe: true, Family: "none",
		Summary: "at-least-once: every client runs any job due that the list does not say done, nothing guarding the effect (the control)",
		New:     noOptions(func(b base) Executor { return &listExec{base: b} })})
	Register(Info{Name: "idempotency-key", Family: "dedupe",
		Summary: "no lock: the effect inserts the job's key in its own transaction (INSERT … ON CONFLICT DO NOTHING), so the sink refuses a second effect as a duplicate",
		New:     noOptions(func(b base) Executor { return &keyedExec{listExec{base: b}} })})
	Register(Info{Name: "check-then-insert", Unsafe: true, Family: "dedupe",
		Summary: "the seeds' createPayment: find the job's effect, insert it if none, no constraint (the known-unsafe control: two finds can both see none)",
		New:     noOptions(func(b base) Executor { return &findExec{listExec{base: b}} })})
	Register(Info{Name: "skip-locked", Family: "queue",
		Summary: "a PostgreSQL queue: the job's row taken with FOR UPDATE SKIP LOCKED, its effect and its completion in that one transaction",
		New:     noOptions(func(b base) Executor { return &queueExec{base: b} })})
	Register(Info{Name: "skip-locked-visibility", Family: "queue", Options: VisibilityOptions{},
		Summary: "a PostgreSQL queue, the common variant: the row taken with SKIP LOCKED and a visibility timeout in a short transaction, the effect outside it; a job not completed in time is handed out again",
		New: func(decode backends.Decoder) (Strategy, error) {
			o := VisibilityOptions{Visibility: config.Duration(500 * time.Millisecond)}
			if err := decode(&o); err != nil {
				return nil, err
			}
			if o.Visibility <= 0 {
				return nil, fmt.Errorf("visibility: must be a positive duration, got %s", o.Visibility)
			}
			return funcStrategy(func(b base) Executor { return &visibleExec{base: b, vt: o.Visibility.D()} }), nil
		}})
}

// funcStrategy is a strategy whose executor is made from the base alone.
type funcStrategy func(b base) Executor

func (f funcStrategy) Open(ctx context.Context, env Env) (Executor, error) {
	b, err := open(ctx, env)
	if err != nil {
		return nil, err
	}
	return f(b), nil
}

func noOptions(f funcStrategy) func(decode backends.Decoder) (Strategy, error) {
	return func(decode backends.Decoder) (Strategy, error) {
		var none struct{}
		if err := decode(&none); err != nil {
			return nil, err
		}
		return f, nil
	}
}

// lockStrategy: the worker takes the case's lock on the job's id around the
// attempt; the executor reads the list, applies the effect and records the
// job complete.
type lockStrategy struct{ o LockOptions }

func (lockStrategy) TakesLock() bool { return true }

func (s lockStrategy) Open(ctx context.Context, env Env) (Executor, error) {
	b, err := open(ctx, env)
	if err != nil {
		return nil, err
	}
	l := &lockExec{listExec: listExec{base: b}, fenced: s.o.Fenced}
	if s.o.Register {
		return &registerExec{l}, nil
	}
	return l, nil
}

// listExec picks from the job list and applies its effect unguarded.
type listExec struct{ base }

func (e *listExec) Pick(ctx context.Context) (string, error) { return e.pickDue(ctx) }
func (e *listExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	return e.effect(ctx, e.plain(job, n, token))
}
func (e *listExec) Complete(ctx context.Context, job string) error { return e.complete(ctx, job) }
func (e *listExec) Abandon(string)                                 {}

type lockExec struct {
	listExec
	fenced bool
}

func (e *lockExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	if e.fenced {
		return e.effect(ctx, e.fencedApply(job, n, token))
	}
	return e.effect(ctx, e.plain(job, n, token))
}

// registerExec checks the completion record under the lock.
type registerExec struct{ *lockExec }

func (e *registerExec) Done(ctx context.Context, job string) (bool, error) {
	octx, cancel := e.op(ctx)
	defer cancel()
	var done bool
	if err := e.conn.QueryRow(octx, `SELECT done FROM lockbench_sink_jobs WHERE id = $1`, e.id(job)).Scan(&done); err != nil {
		return false, fmt.Errorf("check job %s's record: %w", job, err)
	}
	return done, nil
}

type keyedExec struct{ listExec }

func (e *keyedExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	return e.effect(ctx, e.keyed(job, n, token))
}

// findExec is createPayment: find the effect, and insert it only if none
// was found (the insert is the effect, unguarded).
type findExec struct{ listExec }

func (e *findExec) Done(ctx context.Context, job string) (bool, error) {
	octx, cancel := e.op(ctx)
	defer cancel()
	var found bool
	err := e.conn.QueryRow(octx, `SELECT EXISTS (SELECT 1 FROM lockbench_sink_effects WHERE job = $1 AND outcome = $2)`, e.id(job), history.OutcomeApplied).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("find job %s's effect: %w", job, err)
	}
	return found, nil
}

// queueExec holds the job's row locked in a transaction from Pick to
// Complete; the effect is in that transaction.
type queueExec struct {
	base
	tx pgx.Tx
}

func (e *queueExec) Pick(ctx context.Context) (string, error) {
	octx, cancel := e.op(ctx)
	defer cancel()
	tx, err := e.conn.Begin(octx)
	if err != nil {
		return "", fmt.Errorf("take a job: begin: %w", err)
	}
	var id string
	err = tx.QueryRow(octx, `SELECT id FROM lockbench_sink_jobs WHERE state = 'pending' AND due <= clock_timestamp() AND id LIKE $1
		AND n >= $2 AND n < $3 ORDER BY due LIMIT 1 FOR UPDATE SKIP LOCKED`, likePrefix(e.env.Prefix), e.env.First, e.env.First+e.env.Count).Scan(&id)
	if err != nil {
		_ = tx.Rollback(context.Background())
		if errors.Is(err, pgx.ErrNoRows) {
			return "", ErrNoJob
		}
		return "", fmt.Errorf("take a job: %w", err)
	}
	e.tx = tx
	return id[len(e.env.Prefix):], nil
}

func (e *queueExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	if e.tx == nil {
		return "", fmt.Errorf("effect of job %s: no transaction holds it", job)
	}
	octx, cancel := context.WithTimeout(ctx, e.env.OpTimeout+e.env.Effect)
	defer cancel()
	outcome, err := e.plain(job, n, token)(octx, e.tx)
	if err == nil && !waitEffect(octx, e.env.Effect) {
		err = octx.Err()
	}
	if err == nil {
		e.hold(octx)
	}
	if err != nil {
		return "", fmt.Errorf("effect: %w", err)
	}
	return outcome, nil
}

func (e *queueExec) Complete(ctx context.Context, job string) error {
	if e.tx == nil {
		return fmt.Errorf("complete job %s: no transaction holds it", job)
	}
	tx := e.tx
	e.tx = nil
	octx, cancel := e.op(ctx)
	defer cancel()
	if _, err := tx.Exec(octx, `UPDATE lockbench_sink_jobs SET done = true, state = 'done' WHERE id = $1`, e.id(job)); err != nil {
		_ = tx.Rollback(context.Background())
		return fmt.Errorf("record job %s complete: %w", job, err)
	}
	if err := tx.Commit(octx); err != nil {
		return fmt.Errorf("commit job %s: %w", job, err)
	}
	return nil
}

func (e *queueExec) Abandon(string) {
	if e.tx != nil {
		ctx, cancel := e.op(context.Background())
		defer cancel()
		_ = e.tx.Rollback(ctx)
		e.tx = nil
	}
}

// visibleExec takes a job for vt in a short transaction; the effect and
// the completion come after it, each on its own.
type visibleExec struct {
	base
	vt time.Duration
}

func (e *visibleExec) Pick(ctx context.Context) (string, error) {
	octx, cancel := e.op(ctx)
	defer cancel()
	var id string
	err := e.conn.QueryRow(octx, `UPDATE lockbench_sink_jobs SET state = 'taken', visible_at = clock_timestamp() + $2::bigint * interval '1 microsecond'
		WHERE id = (SELECT id FROM lockbench_sink_jobs WHERE due <= clock_timestamp() AND id LIKE $1 AND n >= $3 AND n < $4
			AND (state = 'pending' OR (state = 'taken' AND visible_at <= clock_timestamp()))
			ORDER BY due LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING id`, likePrefix(e.env.Prefix), e.vt.Microseconds(), e.env.First, e.env.First+e.env.Count).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNoJob
	}
	if err != nil {
		return "", fmt.Errorf("take a job: %w", err)
	}
	return id[len(e.env.Prefix):], nil
}

func (e *visibleExec) Effect(ctx context.Context, job string, n int, token uint64) (string, error) {
	return e.effect(ctx, e.plain(job, n, token))
}
func (e *visibleExec) Complete(ctx context.Context, job string) error { return e.complete(ctx, job) }
func (e *visibleExec) Abandon(string)                                 {}
