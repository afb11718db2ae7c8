package backends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lockbench/lockbench/internal/config"
)

// Two alternatives to a distributed lock that the seeds say to consider
// first, when the data the lock would protect lives in one database
// anyway; both run the critical section there (see Store):
//
//   - postgres-for-update: the lock is the row's lock, taken by SELECT ...
//     FOR UPDATE in a transaction that also does the work and is committed
//     by the release. A holder whose session dies (or is ended by
//     idle_in_transaction_session_timeout) loses lock and work together:
//     nothing of it can land late. No fencing token is needed or issued.
//   - postgres-occ: no lock at all. Read the row and its version, work,
//     then UPDATE ... WHERE version = the one read; a conflict writes
//     nothing and the client tries again. Contention costs retries, not
//     waiting.
func init() {
	Register(Info{Name: "postgres-for-update",
		Doc: Doc{
			Servers: "1 PostgreSQL",
			Models:  "alternative: `SELECT … FOR UPDATE` on the key's row in a transaction that also does the work (reads and increments the row) and is committed by the release: a holder whose session ends loses lock and work together",
			Token:   "none needed: the database refuses a dead holder's work",
			Lost:    "none",
			Options: "`wait` (block; try = `NOWAIT`), `idle_in_transaction_session_timeout` (0: never), `connect_timeout`"},
		Paused:  Paused{Shows: PauseKept, For: 3 * time.Second},
		Summary: "alternative: SELECT ... FOR UPDATE, the work in the same transaction, committed on release (PostgreSQL)",
		Options: PgForUpdateOptions{}, New: newPgForUpdate})
	Register(Info{Name: "postgres-occ",
		Doc: Doc{
			Servers: "1 PostgreSQL",
			Models:  "alternative: **no lock**; read the row and its version, work, `UPDATE … WHERE version = $read`; a conflict writes nothing and the client tries again (conflicts counted)",
			Token:   "none",
			Lost:    "none",
			Options: "`connect_timeout`"},
		Paused:  Paused{Shows: PauseKept, For: 3 * time.Second},
		Summary: "alternative: no lock; optimistic concurrency, a versioned compare-and-set, retried on conflict (PostgreSQL)",
		Options: PgOCCOptions{}, New: newPgOCC})
}

// PgForUpdateOptions configure postgres-for-update.
type PgForUpdateOptions struct {
	Wait              string          `yaml:"wait" doc:"block (FOR UPDATE, bounded by the acquire timeout; default) or try (FOR UPDATE NOWAIT)"`
	IdleInTransaction config.Duration `yaml:"idle_in_transaction_session_timeout" doc:"end a holder's session idle that long inside its transaction (default 0: never)"`
	ConnectTimeout    config.Duration `yaml:"connect_timeout" doc:"pgx connect timeout (default none)"`
}

// PgOCCOptions configure postgres-occ.
type PgOCCOptions struct {
	ConnectTimeout config.Duration `yaml:"connect_timeout" doc:"pgx connect timeout (default none)"`
}

type pgForUpdateBackend struct{ opt PgForUpdateOptions }

func newPgForUpdate(decode Decoder) (Backend, error) {
	var o PgForUpdateOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := oneOf("wait", &o.Wait, "block", "try"); err != nil {
		return nil, err
	}
	if o.IdleInTransaction < 0 || o.ConnectTimeout < 0 {
		return nil, errors.New("timeouts must not be negative")
	}
	return &pgForUpdateBackend{opt: o}, nil
}

func (b *pgForUpdateBackend) Servers() []ServerSpec { return pgServer() }
func (b *pgForUpdateBackend) Fenced() bool          { return false }
func (b *pgForUpdateBackend) Totals(ctx context.Context, env Env) (map[string]int64, error) {
	return pgTotals(ctx, env)
}

func (b *pgForUpdateBackend) Open(ctx context.Context, env Env) (Locker, error) {
	cfg, err := pgConfig(env, b.opt.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	if b.opt.IdleInTransaction > 0 {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(b.opt.IdleInTransaction.D().Milliseconds())
	}
	if err := pgOnce(ctx, env, cfg, "pg-counter-ddl", counterDDL); err != nil {
		return nil, fmt.Errorf("create counter table: %w", err)
	}
	return &pgRowLocker{pgRows: pgRows{cfg: cfg}, nowait: b.opt.Wait == "try"}, nil
}

// pgRows is a client's connection and the counter rows it has created.
type pgRows struct {
	cfg  *pgx.ConnConfig
	conn *pgx.Conn
	rows map[string]bool
}

func (p *pgRows) ensure(ctx context.Context, key string) error {
	if p.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, p.cfg)
		if err != nil {
			return fmt.Errorf("connect to postgres-1: %w", err)
		}
		p.conn = conn
	}
	if p.rows == nil {
		p.rows = map[string]bool{}
	}
	if !p.rows[key] {
		if _, err := p.conn.Exec(ctx, "INSERT INTO lockbench_counter (k) VALUES ($1) ON CONFLICT DO NOTHING", key); err != nil {
			p.drop()
			return fmt.Errorf("create the row of %s: %w", key, err)
		}
		p.rows[key] = true
	}
	return nil
}

// drop closes the connection: the server rolls back its transaction and
// frees its row locks.
func (p *pgRows) drop() {
	if p.conn != nil {
		p.conn.Close(context.Background())
		p.conn = nil
	}
}

func (p *pgRows) Close() error {
	p.drop()
	return nil
}

// rowLease is a lease on a row (or, without a lock, only its key).
type rowLease struct {
	key string
	tx  pgx.Tx
}

func (l *rowLease) Key() string           { return l.key }
func (l *rowLease) Token() uint64         { return 0 }
func (l *rowLease) Lost() <-chan struct{} { return nil }

// pgRowLocker holds a row's lock in an open transaction.
type pgRowLocker struct {
	pgRows
	nowait bool
}

func (p *pgRowLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	if err := p.ensure(ctx, key); err != nil {
		return nil, err
	}
	tx, err := p.conn.Begin(ctx)
	if err != nil {
		p.drop()
		return nil, fmt.Errorf("begin: %w", err)
	}
	q := "SELECT version FROM lockbench_counter WHERE k = $1 FOR UPDATE"
	if p.nowait {
		q += " NOWAIT"
	}
	var v int64
	if err := tx.QueryRow(ctx, q, key).Scan(&v); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			if rerr := tx.Rollback(ctx); rerr != nil {
				p.drop()
			}
			return nil, ErrNotAcquired
		}
		// Cancelled or broken: closing the session rolls the transaction
		// back, so whatever it was granted is freed at once.
		p.drop()
		if ctx.Err() != nil {
			return nil, ErrNotAcquired
		}
		return nil, fmt.Errorf("postgres-for-update acquire %s: %w", key, err)
	}
	return &rowLease{key: key, tx: tx}, nil
}

// Work reads and increments the row inside the lease's transaction; the
// release commits it.
func (p *pgRowLocker) Work(ctx context.Context, lease Lease, hold func() bool) (bool, error) {
	l, ok := lease.(*rowLease)
	if !ok || l.tx == nil {
		return false, fmt.Errorf("work: lease of type %T holds no transaction", lease)
	}
	var v int64
	if err := l.tx.QueryRow(ctx, "SELECT value FROM lockbench_counter WHERE k = $1", l.key).Scan(&v); err != nil {
		return false, fmt.Errorf("read %s: %w", l.key, err)
	}
	if !hold() {
		return false, nil
	}
	if _, err := l.tx.Exec(ctx, "UPDATE lockbench_counter SET value = $2, version = version + 1 WHERE k = $1", l.key, v+1); err != nil {
		return false, fmt.Errorf("write %s: %w", l.key, err)
	}
	return true, nil
}

// Release commits the transaction: the work lands with the release, or not
// at all. An error the server sent (the session was ended, the
// transaction aborted) means nothing was committed.
func (p *pgRowLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*rowLease)
	if !ok || l.tx == nil {
		return fmt.Errorf("release: lease of type %T holds no transaction", lease)
	}
	err := l.tx.Commit(ctx)
	l.tx = nil
	if err == nil {
		return nil
	}
	p.drop()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return ErrNotHeld
	}
	return fmt.Errorf("postgres-for-update commit %s: %w", l.key, err)
}

type pgOCCBackend struct{ opt PgOCCOptions }

func newPgOCC(decode Decoder) (Backend, error) {
	var o PgOCCOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.ConnectTimeout < 0 {
		return nil, errors.New("connect_timeout: must not be negative")
	}
	return &pgOCCBackend{opt: o}, nil
}

func (b *pgOCCBackend) Servers() []ServerSpec { return pgServer() }
func (b *pgOCCBackend) Fenced() bool          { return false }
func (b *pgOCCBackend) Lockless() bool        { return true }
func (b *pgOCCBackend) Totals(ctx context.Context, env Env) (map[string]int64, error) {
	return pgTotals(ctx, env)
}

func (b *pgOCCBackend) Open(ctx context.Context, env Env) (Locker, error) {
	cfg, err := pgConfig(env, b.opt.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	if err := pgOCCDDL(ctx, env, cfg); err != nil {
		return nil, err
	}
	return &pgOCCLocker{pgRows: pgRows{cfg: cfg}}, nil
}

func pgOCCDDL(ctx context.Context, env Env, cfg *pgx.ConnConfig) error {
	if err := pgOnce(ctx, env, cfg, "pg-counter-ddl", counterDDL); err != nil {
		return fmt.Errorf("create counter table: %w", err)
	}
	return nil
}

// pgOCCLocker takes no lock: Acquire succeeds at once; Work is a
// versioned compare-and-set in autocommit.
type pgOCCLocker struct{ pgRows }

func (p *pgOCCLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	return &rowLease{key: key}, nil
}

func (p *pgOCCLocker) Work(ctx context.Context, lease Lease, hold func() bool) (bool, error) {
	key := lease.Key()
	if err := p.ensure(ctx, key); err != nil {
		return false, err
	}
	var v, ver int64
	if err := p.conn.QueryRow(ctx, "SELECT value, version FROM lockbench_counter WHERE k = $1", key).Scan(&v, &ver); err != nil {
		p.drop()
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	if !hold() {
		return false, nil
	}
	tag, err := p.conn.Exec(ctx, "UPDATE lockbench_counter SET value = $2, version = version + 1 WHERE k = $1 AND version = $3", key, v+1, ver)
	if err != nil {
		p.drop()
		return false, fmt.Errorf("write %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return false, ErrConflict
	}
	return true, nil
}

func (p *pgOCCLocker) Release(ctx context.Context, lease Lease) error { return nil }
