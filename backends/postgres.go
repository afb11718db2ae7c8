package backends

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lockbench/lockbench/internal/config"
)

// postgres is a PostgreSQL advisory lock through pgx v5. Each client has
// its own connection, because an advisory lock belongs to a session (or a
// transaction): a pooled connection returned to the pool would still hold
// it. There is no lease and no TTL: the lock is held until it is released
// or the session ends, so a paused holder keeps it (safe, but unavailable)
// and a dead one loses it when the server notices the connection is gone
// (TCP keepalive settings). The fencing token is nextval of a sequence,
// taken while the lock is held.
func init() {
	Register(Info{Name: "postgres",
		Doc: Doc{
			Servers: "1 PostgreSQL (the highest major version under `/usr/lib/postgresql`, run as the `postgres` user); with `standby: true` a streaming standby too; with `pooler: pgbouncer` a pgbouncer in front",
			Models:  "advisory locks through jackc/pgx v5 on one pinned connection per client: `pg_try_advisory_lock` / `pg_advisory_lock` / `pg_advisory_unlock`, or `pg_advisory_xact_lock` inside a transaction",
			Token:   "`nextval` of a sequence taken while holding the lock",
			Lost:    "none: no lease; the lock lives as long as the session",
			Options: "`scope` (session; transaction), `wait` (try; block), `connect_timeout`, server `tcp_keepalives_idle/interval/count`, `tcp_user_timeout`, `client_connection_check_interval`, `standby` (false), `pooler` (none; pgbouncer: transaction pooling), `pool` (pinned; leaky: a shared pool, the connection returned right after locking, the misuse)"},
		Paused:  Paused{Shows: PauseKept, For: 3 * time.Second},
		Summary: "PostgreSQL advisory lock (pgx v5), session or transaction scoped; token from a sequence", Options: PostgresOptions{}, New: newPostgres, Drivers: true})
}

// PostgresOptions configure the postgres backend.
type PostgresOptions struct {
	// Scope is session (pg_advisory_lock / pg_advisory_unlock, default) or
	// transaction (pg_advisory_xact_lock inside BEGIN ... COMMIT).
	Scope string `yaml:"scope" doc:"session (pg_advisory_lock, default) or transaction (pg_advisory_xact_lock)"`
	// Wait is try (pg_try_advisory_lock, default: the client retries with
	// backoff) or block (pg_advisory_lock, bounded by the acquire timeout).
	Wait string `yaml:"wait" doc:"try (pg_try_advisory_lock with backoff, default) or block (pg_advisory_lock)"`
	// ConnectTimeout of pgx (default: none).
	ConnectTimeout config.Duration `yaml:"connect_timeout" doc:"pgx connect timeout (default none)"`
	// Server settings deciding how fast a dead client's session, and its
	// locks, are dropped (PostgreSQL defaults: the kernel's keepalive, 0).
	TCPKeepalivesIdle             int             `yaml:"tcp_keepalives_idle" doc:"server tcp_keepalives_idle in s (default: the kernel's)"`
	TCPKeepalivesInterval         int             `yaml:"tcp_keepalives_interval" doc:"server tcp_keepalives_interval in s (default: the kernel's)"`
	TCPKeepalivesCount            int             `yaml:"tcp_keepalives_count" doc:"server tcp_keepalives_count (default: the kernel's)"`
	TCPUserTimeout                config.Duration `yaml:"tcp_user_timeout" doc:"server tcp_user_timeout (default 0: the kernel's)"`
	ClientConnectionCheckInterval config.Duration `yaml:"client_connection_check_interval" doc:"server client_connection_check_interval (default 0: off)"`
	// Pooler puts a pgbouncer in transaction pooling mode between the
	// clients and the server (session advisory locks are then run on
	// whichever server connection each transaction gets).
	Pooler string `yaml:"pooler" doc:"none (default) or pgbouncer: clients go through pgbouncer in transaction pooling mode"`
	// Pool is how a client holds its connection: pinned (its own, for as
	// long as it holds a lock: the default) or leaky (the instance's
	// clients share a pool, and a client returns the connection to it
	// right after locking, without unlocking: the misuse).
	Pool string `yaml:"pool" doc:"pinned (default: a connection of its own per client) or leaky (a shared pool, the connection returned after locking)"`
	// Standby adds postgres-2, a streaming replica of postgres-1 (the
	// promote fault makes it the primary); clients connect to whichever
	// of the two accepts writes.
	Standby bool `yaml:"standby" doc:"add postgres-2, a streaming standby of postgres-1; clients follow the writable one (default false)"`
}

type postgresBackend struct{ opt PostgresOptions }

func newPostgres(decode Decoder) (Backend, error) {
	var o PostgresOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := oneOf("scope", &o.Scope, "session", "transaction"); err != nil {
		return nil, err
	}
	if err := oneOf("wait", &o.Wait, "try", "block"); err != nil {
		return nil, err
	}
	if err := oneOf("pooler", &o.Pooler, "none", "pgbouncer"); err != nil {
		return nil, err
	}
	if err := oneOf("pool", &o.Pool, "pinned", "leaky"); err != nil {
		return nil, err
	}
	if o.TCPKeepalivesIdle < 0 || o.TCPKeepalivesInterval < 0 || o.TCPKeepalivesCount < 0 || o.TCPUserTimeout < 0 || o.ClientConnectionCheckInterval < 0 {
		return nil, errors.New("keepalive settings must not be negative")
	}
	return &postgresBackend{opt: o}, nil
}

func (b *postgresBackend) Servers() []ServerSpec {
	set := map[string]string{}
	o := b.opt
	if o.TCPKeepalivesIdle > 0 {
		set["tcp_keepalives_idle"] = fmt.Sprint(o.TCPKeepalivesIdle)
	}
	if o.TCPKeepalivesInterval > 0 {
		set["tcp_keepalives_interval"] = fmt.Sprint(o.TCPKeepalivesInterval)
	}
	if o.TCPKeepalivesCount > 0 {
		set["tcp_keepalives_count"] = fmt.Sprint(o.TCPKeepalivesCount)
	}
	if o.TCPUserTimeout > 0 {
		set["tcp_user_timeout"] = fmt.Sprint(o.TCPUserTimeout.D().Milliseconds())
	}
	if o.ClientConnectionCheckInterval > 0 {
		set["client_connection_check_interval"] = fmt.Sprint(o.ClientConnectionCheckInterval.D().Milliseconds())
	}
	specs := []ServerSpec{{Kind: "postgres", Name: "postgres-1", Settings: set}}
	if b.opt.Standby {
		st := map[string]string{"standby_of": "postgres-1"}
		for k, v := range set {
			st[k] = v
		}
		specs = append(specs, ServerSpec{Kind: "postgres", Name: "postgres-2", Settings: st})
	}
	if b.opt.Pooler == "pgbouncer" {
		specs = append(specs, ServerSpec{Kind: "pgbouncer", Name: "pgbouncer-1", Settings: map[string]string{"upstream": "postgres-1", "pool_mode": "transaction"}})
	}
	return specs
}

// Dials says which server the clients connect to: the pooler, when there
// is one.
func (b *postgresBackend) Dials(instance, instances int) []string {
	if b.opt.Pooler == "pgbouncer" {
		return []string{"pgbouncer-1"}
	}
	if b.opt.Standby {
		return []string{"postgres-1", "postgres-2"}
	}
	return []string{"postgres-1"}
}

func (b *postgresBackend) Fenced() bool { return true }

func (b *postgresBackend) Open(ctx context.Context, env Env) (Locker, error) {
	server := "postgres-1"
	if b.opt.Pooler == "pgbouncer" {
		server = "pgbouncer-1"
	}
	var more []string
	if b.opt.Standby && b.opt.Pooler != "pgbouncer" {
		more = []string{"postgres-2"}
	}
	cfg, err := pgConfigFor(env, server, b.opt.ConnectTimeout, more...)
	if err != nil {
		return nil, err
	}
	if b.opt.Pooler == "pgbouncer" {
		// No named prepared statements: a transaction pooler hands each
		// transaction whichever server connection is free.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	l := &pgLocker{cfg: cfg, opt: b.opt}
	// Create the token sequence once per instance; instances may race, and
	// IF NOT EXISTS can still collide in the catalog, so retry once.
	if _, err := env.Shared.Get("pg-sequence", func() (any, func() error, error) {
		conn, err := l.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer conn.Close(context.Background())
		for i := 0; ; i++ {
			_, err = conn.Exec(ctx, "CREATE SEQUENCE IF NOT EXISTS lockbench_fence")
			if err == nil || i == 2 {
				return true, nil, err
			}
		}
	}); err != nil {
		return nil, fmt.Errorf("create fencing sequence: %w", err)
	}
	if b.opt.Pool == "leaky" {
		v, err := env.Shared.Get("pg-pool", func() (any, func() error, error) {
			pc, err := pgxpool.ParseConfig("")
			if err != nil {
				return nil, nil, err
			}
			pc.ConnConfig, pc.MaxConns = cfg, 2
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				return nil, nil, fmt.Errorf("postgres pool: %w", err)
			}
			return pool, func() error { pool.Close(); return nil }, nil
		})
		if err != nil {
			return nil, err
		}
		return &pgLeakyLocker{pool: v.(*pgxpool.Pool)}, nil
	}
	return l, nil
}

// pgLeakyLocker is the misuse of a connection pool: it takes a session
// advisory lock on a pooled connection and returns the connection to the
// pool at once, still holding the lock, then unlocks on whichever
// connection the pool gives it next. An advisory lock is re-entrant within
// its session, so the next client handed that connection gets the lock
// again while its first holder still works.
type pgLeakyLocker struct{ pool *pgxpool.Pool }

func (p *pgLeakyLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	id := lockID(key)
	var got bool
	var token int64
	err := p.pool.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", id).Scan(&got)
	if err == nil && got {
		err = p.pool.QueryRow(ctx, "SELECT nextval('lockbench_fence')").Scan(&token)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("postgres acquire %s: %w", key, err)
	case !got:
		return nil, ErrNotAcquired
	}
	return &pgLease{key: key, id: id, token: uint64(token)}, nil
}

func (p *pgLeakyLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*pgLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a postgres lease", lease)
	}
	var released bool
	if err := p.pool.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", l.id).Scan(&released); err != nil {
		return fmt.Errorf("postgres release %s: %w", l.key, err)
	}
	if !released {
		return ErrNotHeld
	}
	return nil
}

func (p *pgLeakyLocker) Close() error { return nil }

// pgLocker is one client: one connection, opened lazily and dropped after
// any error whose effect on the session is unknown.
type pgLocker struct {
	cfg  *pgx.ConnConfig
	opt  PostgresOptions
	conn *pgx.Conn
	tx   pgx.Tx
}

type pgLease struct {
	key   string
	id    int64
	token uint64
}

func (l *pgLease) Key() string           { return l.key }
func (l *pgLease) Token() uint64         { return l.token }
func (l *pgLease) Lost() <-chan struct{} { return nil }

func (p *pgLocker) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres-1: %w", err)
	}
	return conn, nil
}

// lockID maps a key to the 64-bit advisory lock id.
func lockID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("lockbench:" + key))
	return int64(h.Sum64())
}

// drop closes the connection after an error: the server then releases
// every lock of the session, so nothing is held behind the client's back.
func (p *pgLocker) drop() {
	if p.conn != nil {
		p.conn.Close(context.Background())
	}
	p.conn, p.tx = nil, nil
}

func (p *pgLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	if p.conn == nil {
		conn, err := p.connect(ctx)
		if err != nil {
			return nil, err
		}
		p.conn = conn
	}
	id := lockID(key)
	var got bool
	var token int64
	var err error
	if p.opt.Scope == "transaction" {
		got, token, err = p.acquireTx(ctx, id)
	} else {
		got, token, err = p.acquireSession(ctx, id)
	}
	if err != nil {
		p.drop()
		if ctx.Err() != nil {
			// The query was cancelled and the session closed, which
			// releases anything it might have been granted.
			return nil, ErrNotAcquired
		}
		return nil, fmt.Errorf("postgres acquire %s: %w", key, err)
	}
	if !got {
		return nil, ErrNotAcquired
	}
	return &pgLease{key: key, id: id, token: uint64(token)}, nil
}

func (p *pgLocker) acquireSession(ctx context.Context, id int64) (bool, int64, error) {
	if p.opt.Wait == "block" {
		if _, err := p.conn.Exec(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
			return false, 0, err
		}
	} else {
		var got bool
		if err := p.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", id).Scan(&got); err != nil || !got {
			return false, 0, err
		}
	}
	var token int64
	if err := p.conn.QueryRow(ctx, "SELECT nextval('lockbench_fence')").Scan(&token); err != nil {
		return false, 0, err
	}
	return true, token, nil
}

func (p *pgLocker) acquireTx(ctx context.Context, id int64) (bool, int64, error) {
	tx, err := p.conn.Begin(ctx)
	if err != nil {
		return false, 0, err
	}
	if p.opt.Wait == "block" {
		_, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", id)
	} else {
		var got bool
		err = tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", id).Scan(&got)
		if err == nil && !got {
			return false, 0, tx.Rollback(ctx)
		}
	}
	if err != nil {
		return false, 0, err
	}
	var token int64
	if err := tx.QueryRow(ctx, "SELECT nextval('lockbench_fence')").Scan(&token); err != nil {
		return false, 0, err
	}
	p.tx = tx
	return true, token, nil
}

func (p *pgLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*pgLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a postgres lease", lease)
	}
	if p.conn == nil {
		return ErrNotHeld // the session died: its locks went with it
	}
	if p.opt.Scope == "transaction" {
		if p.tx == nil {
			return ErrNotHeld
		}
		err := p.tx.Commit(ctx)
		p.tx = nil
		if err != nil {
			p.drop()
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				return ErrNotHeld
			}
			return fmt.Errorf("postgres release %s: %w", l.key, err)
		}
		return nil
	}
	var released bool
	if err := p.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", l.id).Scan(&released); err != nil {
		p.drop()
		return fmt.Errorf("postgres release %s: %w", l.key, err)
	}
	if !released {
		return ErrNotHeld
	}
	return nil
}

func (p *pgLocker) Close() error {
	p.drop()
	return nil
}
