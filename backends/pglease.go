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

// postgres-lease: a lease row under a unique constraint, with an expiry,
// in PostgreSQL (the seeds' "tabela de locks com constraint única"). To
// acquire, a client inserts the row for its key, or takes it over when the
// holder's lease has expired (INSERT ... ON CONFLICT DO UPDATE ... WHERE
// expires <= now), and gets a fencing token from a sequence; release and
// extension name the owner, so nobody removes or extends a lease that is
// not theirs. Expiry is judged by the database's clock only
// (clock_timestamp()), so client clocks never matter; the client gives a
// lease up a drift margin before the row expires, as Redlock does.
func init() {
	Register(Info{Name: "postgres-lease",
		Doc: Doc{
			Servers: "1 PostgreSQL",
			Models:  "alternative: a lease row under a unique key with an expiry, taken by `INSERT … ON CONFLICT (k) DO UPDATE … WHERE expires <= clock_timestamp()`; release and extend name the owner; expiry judged by the database's clock only",
			Token:   "`nextval` of a sequence, drawn once the row is the client's (under its lock, in the same implicit transaction): a token drawn with the INSERT's values, before its wait for the row, can be older than a grant that came between (seen: 2 regressions in 600 grants, 20 clients on one server)",
			Lost:    "client watchdog, as `redis`",
			Options: "`drift_factor` (0.01), `connect_timeout`"},
		Paused:  Paused{Shows: PauseLost, For: 3 * time.Second},
		Summary: "lease row with a unique key and an expiry in PostgreSQL (INSERT ... ON CONFLICT ... WHERE expired); token from a sequence",
		Options: PgLeaseOptions{}, New: newPgLease})
}

// PgLeaseOptions configure postgres-lease.
type PgLeaseOptions struct {
	ConnectTimeout config.Duration `yaml:"connect_timeout" doc:"pgx connect timeout (default none)"`
	DriftFactor    *float64        `yaml:"drift_factor" doc:"shorten the client's lease validity by ttl*factor (default 0.01)"`
	// Renew is how an extension renews the row: compare-and-set (only the
	// caller's row, while unexpired) or unconditional, an upsert that
	// writes the caller's row whoever holds it (openbao #2097, #2100: a
	// node renewing after its lease expired took the lock back from the
	// node that had acquired it since).
	Renew string `yaml:"renew" doc:"how an extension renews the row: compare-and-set (default) or unconditional (an upsert that takes the row back whoever holds it)"`
	// ValidityWatchdog gives the lease up when its validity passes (the
	// default); false models a client that trusts its renewals' replies
	// alone (it learns of a loss only when a renewal is refused).
	ValidityWatchdog *bool `yaml:"validity_watchdog" doc:"give the lease up when its validity passes (default true); false: trust the renewals' replies alone"`
}

type pgLeaseBackend struct{ opt PgLeaseOptions }

func newPgLease(decode Decoder) (Backend, error) {
	var o PgLeaseOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if o.DriftFactor == nil {
		d := 0.01
		o.DriftFactor = &d
	}
	if *o.DriftFactor < 0 || *o.DriftFactor >= 0.5 {
		return nil, fmt.Errorf("drift_factor: %v is outside [0, 0.5)", *o.DriftFactor)
	}
	if o.ConnectTimeout < 0 {
		return nil, errors.New("connect_timeout: must not be negative")
	}
	if err := oneOf("renew", &o.Renew, "compare-and-set", "unconditional"); err != nil {
		return nil, err
	}
	if o.ValidityWatchdog == nil {
		on := true
		o.ValidityWatchdog = &on
	}
	return &pgLeaseBackend{opt: o}, nil
}

func (b *pgLeaseBackend) Servers() []ServerSpec                     { return pgServer() }
func (b *pgLeaseBackend) Fenced() bool                              { return true }
func (b *pgLeaseBackend) LeaseTime(ttl time.Duration) time.Duration { return ttl }

func (b *pgLeaseBackend) Open(ctx context.Context, env Env) (Locker, error) {
	cfg, err := pgConfig(env, b.opt.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	if err := pgOnce(ctx, env, cfg, "pg-lease-ddl",
		"CREATE TABLE IF NOT EXISTS lockbench_lease (k text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires timestamptz NOT NULL)",
		"CREATE SEQUENCE IF NOT EXISTS lockbench_lease_token"); err != nil {
		return nil, fmt.Errorf("create lease table: %w", err)
	}
	ttl := env.TTL
	return &pgLeaseLocker{cfg: cfg, ttl: ttl, validity: ttl - time.Duration(float64(ttl)**b.opt.DriftFactor) - 2*time.Millisecond,
		unconditional: b.opt.Renew == "unconditional", watchdog: *b.opt.ValidityWatchdog}, nil
}

// pgLeaseLocker is one client, on a connection of its own (autocommit).
type pgLeaseLocker struct {
	cfg      *pgx.ConnConfig
	conn     *pgx.Conn
	ttl      time.Duration
	validity time.Duration
	// unconditional: Extend upserts the caller's row (Renew); watchdog:
	// the lease is given up when its validity passes (ValidityWatchdog).
	unconditional, watchdog bool
}

type pgLeaseLease struct {
	key, owner string
	token      uint64
	wd         *Watchdog
}

func (l *pgLeaseLease) Key() string   { return l.key }
func (l *pgLeaseLease) Token() uint64 { return l.token }
func (l *pgLeaseLease) Lost() <-chan struct{} {
	if l.wd == nil {
		return nil
	}
	return l.wd.Lost()
}

func (p *pgLeaseLocker) ensure(ctx context.Context) error {
	if p.conn != nil {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		// the operation's statement was never written: not sent
		return fmt.Errorf("connect to postgres-1: %w: %w", ErrNotSent, err)
	}
	p.conn = conn
	return nil
}

// pgUnsent marks an error pgx guarantees came before any data was sent
// (pgconn.SafeToRetry) as ErrNotSent.
func pgUnsent(err error) error {
	if pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}

// drop closes the connection after an error whose effect is unknown.
func (p *pgLeaseLocker) drop() {
	if p.conn != nil {
		p.conn.Close(context.Background())
		p.conn = nil
	}
}

func (p *pgLeaseLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	if err := p.ensure(ctx); err != nil {
		return nil, err
	}
	owner := randomID()
	sent := time.Now()
	var token int64
	// The token is drawn once the row is this client's, under the row's
	// lock, in one implicit transaction (a batch ends with one Sync): a
	// token drawn with the INSERT's values, before its wait for the row,
	// could be older than a grant that came between (a later holder with
	// a lower token, whose writes the fence then refuses).
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO lockbench_lease AS l (k, owner, token, expires)
VALUES ($1, $2, 0, clock_timestamp() + make_interval(secs => $3))
ON CONFLICT (k) DO UPDATE SET owner = EXCLUDED.owner, token = 0, expires = EXCLUDED.expires
WHERE l.expires <= clock_timestamp()`, key, owner, p.ttl.Seconds())
	b.Queue(`UPDATE lockbench_lease SET token = nextval('lockbench_lease_token') WHERE k = $1 AND owner = $2 RETURNING token`, key, owner)
	br := p.conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&token)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNotAcquired
	case err != nil:
		// The row may have been written before the error: unknown.
		p.drop()
		return nil, fmt.Errorf("postgres-lease acquire %s: %w", key, pgUnsent(err))
	}
	return &pgLeaseLease{key: key, owner: owner, token: uint64(token), wd: NewWatchdog(p.validityLeft(sent))}, nil
}

func (p *pgLeaseLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*pgLeaseLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a postgres-lease lease", lease)
	}
	if l.wd != nil {
		l.wd.Stop()
	}
	if err := p.ensure(ctx); err != nil {
		return err
	}
	tag, err := p.conn.Exec(ctx, "DELETE FROM lockbench_lease WHERE k = $1 AND owner = $2", l.key, l.owner)
	if err != nil {
		p.drop()
		return fmt.Errorf("postgres-lease release %s: %w", l.key, pgUnsent(err))
	}
	if tag.RowsAffected() == 0 {
		return ErrNotHeld
	}
	return nil
}

// Extend pushes the row's expiry out by the TTL, if the lease is still the
// caller's and has not expired; an unconditional renewal writes the
// caller's row whoever holds it, and is never refused.
func (p *pgLeaseLocker) Extend(ctx context.Context, lease Lease) error {
	l, ok := lease.(*pgLeaseLease)
	if !ok {
		return fmt.Errorf("extend: lease of type %T is not a postgres-lease lease", lease)
	}
	if err := p.ensure(ctx); err != nil {
		return err
	}
	sent := time.Now()
	q := `UPDATE lockbench_lease SET expires = clock_timestamp() + make_interval(secs => $3)
WHERE k = $1 AND owner = $2 AND expires > clock_timestamp()`
	args := []any{l.key, l.owner, p.ttl.Seconds()}
	if p.unconditional {
		q = `INSERT INTO lockbench_lease AS l (k, owner, token, expires)
VALUES ($1, $2, $4, clock_timestamp() + make_interval(secs => $3))
ON CONFLICT (k) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, expires = EXCLUDED.expires`
		args = append(args, int64(l.token))
	}
	tag, err := p.conn.Exec(ctx, q, args...)
	if err != nil {
		p.drop()
		return fmt.Errorf("postgres-lease extend %s: %w", l.key, pgUnsent(err))
	}
	if tag.RowsAffected() == 0 {
		if l.wd != nil {
			l.wd.Fire() // a refused renewal is how a trusting client learns
		}
		return ErrNotHeld
	}
	if l.wd != nil {
		// The service renewed it (MODEL A1: ok), even when the client's
		// own validity had run out already: its lost signal says so.
		l.wd.Reset(p.validityLeft(sent))
	}
	return nil
}

// validityLeft is how long a lease granted or renewed by a request sent
// at sent stays valid for the client: without the watchdog, until a
// renewal is refused.
func (p *pgLeaseLocker) validityLeft(sent time.Time) time.Duration {
	if !p.watchdog {
		return 24 * time.Hour
	}
	return p.validity - time.Since(sent)
}

// Forge builds a lease for key with an owner nobody has.
func (p *pgLeaseLocker) Forge(key string) Lease {
	return &pgLeaseLease{key: key, owner: randomID()}
}

func (p *pgLeaseLocker) Close() error {
	p.drop()
	return nil
}
