package jobs

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
)

// The sink's tables. lockbench_sink_jobs is the job list every strategy reads
// (and the queue strategies take rows of): a job is due at due, done once
// an executor recorded it complete. lockbench_sink_effects is the sink's own
// record: one row per effect it committed, with what it did with it.
// lockbench_sink_fence holds, per job, the highest token the sink applied an
// effect with; lockbench_sink_keys, the idempotency keys.
var sinkDDL = []string{
	`CREATE TABLE IF NOT EXISTS lockbench_sink_jobs (id text PRIMARY KEY, due timestamptz NOT NULL,
		state text NOT NULL DEFAULT 'pending', visible_at timestamptz, done boolean NOT NULL DEFAULT false)`,
	`CREATE TABLE IF NOT EXISTS lockbench_sink_effects (n bigserial PRIMARY KEY, job text NOT NULL, executor text NOT NULL,
		attempt int NOT NULL, token numeric NOT NULL DEFAULT 0, outcome text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
	`CREATE TABLE IF NOT EXISTS lockbench_sink_fence (job text PRIMARY KEY, token numeric NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS lockbench_sink_keys (job text PRIMARY KEY)`,
	// n is the job's number: a side-by-side trial takes its own.
	`ALTER TABLE lockbench_sink_jobs ADD COLUMN IF NOT EXISTS n int NOT NULL DEFAULT 0`,
}

// sinkConfig is the pgx configuration of a connection to the sink.
func sinkConfig(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error), creds *backends.Credentials, timeout time.Duration) (*pgx.ConnConfig, error) {
	cfg, err := backends.PostgresConfig(addr, creds, max(timeout, time.Second))
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	if dial != nil {
		cfg.DialFunc = pgconn.DialFunc(dial)
	}
	return cfg, nil
}

// Connect opens a connection to the sink at addr (from the coordinator:
// dial nil, the plain dialer).
func Connect(ctx context.Context, addr string, creds *backends.Credentials) (*pgx.Conn, error) {
	cfg, err := sinkConfig(addr, nil, creds, 5*time.Second)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the sink %s: %w", addr, err)
	}
	return conn, nil
}

// Prepare makes the sink's tables and clears the case's rows (those whose
// job id starts with prefix: a reused or shared cluster keeps another
// case's), from the coordinator, before any worker starts.
func Prepare(ctx context.Context, conn *pgx.Conn, prefix string) error {
	for _, st := range sinkDDL {
		if _, err := conn.Exec(ctx, st); err != nil {
			return fmt.Errorf("sink: %s: %w", strings.Fields(st)[5], err)
		}
	}
	for _, t := range []string{"lockbench_sink_jobs WHERE id", "lockbench_sink_effects WHERE job", "lockbench_sink_fence WHERE job", "lockbench_sink_keys WHERE job"} {
		if _, err := conn.Exec(ctx, "DELETE FROM "+t+" LIKE $1", likePrefix(prefix)); err != nil {
			return fmt.Errorf("sink: clear %s: %w", strings.Fields(t)[0], err)
		}
	}
	return nil
}

// Publish puts the case's jobs on the list: for each of its lanes (trials
// side by side; 1 for a case of one) count jobs, job n (id
// prefix+"j<n>") due (n mod count)×every from now, by the sink's clock.
// The coordinator calls it once the case has started.
func Publish(ctx context.Context, conn *pgx.Conn, prefix string, lanes, count int, every time.Duration) error {
	_, err := conn.Exec(ctx, `INSERT INTO lockbench_sink_jobs (id, due, n)
		SELECT $1 || 'j' || g, clock_timestamp() + (g % $3::int) * ($2::bigint * interval '1 microsecond'), g
		FROM generate_series(0, $3::int * $4::int - 1) AS g`, prefix, every.Microseconds(), count, max(lanes, 1))
	if err != nil {
		return fmt.Errorf("sink: publish %d jobs: %w", count*max(lanes, 1), err)
	}
	return nil
}

// Record is one effect the sink committed.
type Record struct {
	N        int64 // the sink's sequence number
	Job      string
	Executor string
	Attempt  int64
	Token    uint64
	Outcome  string
}

// Event is the record as the history holds it: a sink-effect mark (its
// time is the caller's: when the record was read).
func (r Record) Event() history.Event {
	return history.Event{Type: history.Mark, F: history.MarkSinkEffect, Proc: r.Executor, Key: r.Job, Attempt: r.Attempt, Token: r.Token, Outcome: r.Outcome}
}

// Read returns the case's committed effect records with a sequence number
// above after, in the sink's order, their job ids without the prefix.
// Rows commit out of sequence order (a transaction that took its number
// earlier can commit later), so a caller keeps the numbers it has seen and
// reads again from the lowest it may still miss (ReadFrom).
func Read(ctx context.Context, conn *pgx.Conn, prefix string, after int64) ([]Record, error) {
	rows, err := conn.Query(ctx, `SELECT n, job, executor, attempt, token::text, outcome FROM lockbench_sink_effects
		WHERE n > $1 AND job LIKE $2 ORDER BY n`, after, likePrefix(prefix))
	if err != nil {
		return nil, fmt.Errorf("sink: read effects: %w", err)
	}
	var out []Record
	for rows.Next() {
		var r Record
		var token string
		if err := rows.Scan(&r.N, &r.Job, &r.Executor, &r.Attempt, &token, &r.Outcome); err != nil {
			return nil, fmt.Errorf("sink: read effects: %w", err)
		}
		if r.Token, err = strconv.ParseUint(token, 10, 64); err != nil {
			return nil, fmt.Errorf("sink: effect %d: token %q: %w", r.N, token, err)
		}
		r.Job = strings.TrimPrefix(r.Job, prefix)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: read effects: %w", err)
	}
	return out, nil
}

// likePrefix is a LIKE pattern for ids starting with prefix (whose own
// characters are literal).
func likePrefix(prefix string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(prefix) + "%"
}

// Tracker reads a sink's new records as they commit: each record once, in
// the order they are found (by sequence number within one read), however
// late a transaction that took an early number commits.
type Tracker struct {
	Prefix string
	seen   map[int64]bool
	hi     int64 // the highest number seen
}

// window is how far below the highest number seen a read looks again for
// rows whose transactions committed late; the last read (Next with all)
// looks at every row.
const window = 4096

// Next reads what committed since the last call; all reads every row of
// the case again (the last read, once no client runs).
func (t *Tracker) Next(ctx context.Context, conn *pgx.Conn, all bool) ([]Record, error) {
	if t.seen == nil {
		t.seen = map[int64]bool{}
	}
	from := max(0, t.hi-window)
	if all {
		from = 0
	}
	recs, err := Read(ctx, conn, t.Prefix, from)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, r := range recs {
		t.hi = max(t.hi, r.N)
		if !t.seen[r.N] {
			t.seen[r.N] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// logEffect records, inside tx, what the sink did with an effect.
func logEffect(ctx context.Context, tx pgx.Tx, job, executor string, n int, token uint64, outcome string) error {
	_, err := tx.Exec(ctx, `INSERT INTO lockbench_sink_effects (job, executor, attempt, token, outcome) VALUES ($1, $2, $3, $4::numeric, $5)`,
		job, executor, n, strconv.FormatUint(token, 10), outcome)
	return err
}
