package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/wait"
)

// base is what every executor has: its own connection to the sink, and
// the steps the strategies share.
type base struct {
	env  Env
	conn *pgx.Conn
}

func open(ctx context.Context, env Env) (base, error) {
	cfg, err := sinkConfig(env.Sink, env.Dial, env.Creds, env.OpTimeout)
	if err != nil {
		return base{}, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return base{}, fmt.Errorf("connect to the sink: %w", err)
	}
	return base{env: env, conn: conn}, nil
}

func (b *base) Close() error { return b.conn.Close(context.Background()) }

func (b *base) id(job string) string { return b.env.Prefix + job }

func (b *base) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.env.OpTimeout)
}

// pickDue is the list's check: a job due and not recorded done, at random
// among them (so that clients spread over the jobs due), read outside any
// lock or transaction of the job. Of a periodic job it is the latest
// period due, done or not: a replica's timer fires at each period.
func (b *base) pickDue(ctx context.Context) (string, error) {
	octx, cancel := b.op(ctx)
	defer cancel()
	var id string
	q := `SELECT id FROM lockbench_sink_jobs WHERE NOT done AND due <= clock_timestamp() AND id LIKE $1 AND n >= $2 AND n < $3
		ORDER BY random() LIMIT 1`
	if b.env.Periodic {
		q = `SELECT id FROM lockbench_sink_jobs WHERE due <= clock_timestamp() AND id LIKE $1 AND n >= $2 AND n < $3
		ORDER BY due DESC LIMIT 1`
	}
	err := b.conn.QueryRow(octx, q, likePrefix(b.env.Prefix), b.env.First, b.env.First+b.env.Count).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNoJob
	}
	if err != nil {
		return "", fmt.Errorf("pick a due job: %w", err)
	}
	return id[len(b.env.Prefix):], nil
}

// complete records the job done on the list.
func (b *base) complete(ctx context.Context, job string) error {
	octx, cancel := b.op(ctx)
	defer cancel()
	if _, err := b.conn.Exec(octx, `UPDATE lockbench_sink_jobs SET done = true, state = 'done' WHERE id = $1`, b.id(job)); err != nil {
		return fmt.Errorf("record job %s complete: %w", job, err)
	}
	return nil
}

// effect runs apply in one transaction of its own, which lasts the
// effect's time before it commits, and returns what apply said the sink
// did.
func (b *base) effect(ctx context.Context, apply func(ctx context.Context, tx pgx.Tx) (string, error)) (string, error) {
	octx, cancel := context.WithTimeout(ctx, b.env.OpTimeout+b.env.Effect)
	defer cancel()
	tx, err := b.conn.Begin(octx)
	if err != nil {
		return "", fmt.Errorf("effect: begin: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after a commit it does nothing
	outcome, err := apply(octx, tx)
	if err != nil {
		return "", fmt.Errorf("effect: %w", err)
	}
	if !wait.Sleep(octx, b.env.Effect) {
		return "", fmt.Errorf("effect: %w", octx.Err())
	}
	b.hold(octx)
	if err := tx.Commit(octx); err != nil {
		return "", fmt.Errorf("effect: commit: %w", err)
	}
	return outcome, nil
}

// hold waits, inside the effect's transaction, where a fault aimed at the
// during-effect phase holds the executor (Env.Hold).
func (b *base) hold(ctx context.Context) {
	if b.env.Hold != nil {
		b.env.Hold(ctx)
	}
}

// plain applies the effect unguarded: the sink applies whatever reaches it.
func (b *base) plain(job string, n int, token uint64) func(ctx context.Context, tx pgx.Tx) (string, error) {
	return func(ctx context.Context, tx pgx.Tx) (string, error) {
		return history.OutcomeApplied, logEffect(ctx, tx, b.id(job), b.env.Executor, n, token, history.OutcomeApplied)
	}
}

// fencedApply applies the effect only if its token is at least the highest the
// sink applied an effect of the job with (the fence row, locked for the
// transaction); below it, the sink refuses it as stale.
func (b *base) fencedApply(job string, n int, token uint64) func(ctx context.Context, tx pgx.Tx) (string, error) {
	return func(ctx context.Context, tx pgx.Tx) (string, error) {
		tok := fmt.Sprint(token)
		if _, err := tx.Exec(ctx, `INSERT INTO lockbench_sink_fence (job, token) VALUES ($1, 0) ON CONFLICT DO NOTHING`, b.id(job)); err != nil {
			return "", err
		}
		var stale bool
		if err := tx.QueryRow(ctx, `SELECT token > $2::numeric FROM lockbench_sink_fence WHERE job = $1 FOR UPDATE`, b.id(job), tok).Scan(&stale); err != nil {
			return "", err
		}
		outcome := history.OutcomeApplied
		if stale {
			outcome = history.OutcomeStale
		} else if _, err := tx.Exec(ctx, `UPDATE lockbench_sink_fence SET token = $2::numeric WHERE job = $1`, b.id(job), tok); err != nil {
			return "", err
		}
		return outcome, logEffect(ctx, tx, b.id(job), b.env.Executor, n, token, outcome)
	}
}

// keyed applies the effect under an idempotency key: the key's insert, in
// the effect's own transaction, refuses a second effect of the job (INSERT
// … ON CONFLICT DO NOTHING), which the sink records as a duplicate.
func (b *base) keyed(job string, n int, token uint64) func(ctx context.Context, tx pgx.Tx) (string, error) {
	return func(ctx context.Context, tx pgx.Tx) (string, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO lockbench_sink_keys (job) VALUES ($1) ON CONFLICT DO NOTHING`, b.id(job))
		if err != nil {
			return "", err
		}
		outcome := history.OutcomeApplied
		if tag.RowsAffected() == 0 {
			outcome = history.OutcomeDuplicate
		}
		return outcome, logEffect(ctx, tx, b.id(job), b.env.Executor, n, token, outcome)
	}
}

// waitEffect waits out the effect's time inside its transaction.
func waitEffect(ctx context.Context, d time.Duration) bool { return wait.Sleep(ctx, d) }
