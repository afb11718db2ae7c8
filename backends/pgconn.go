package backends

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lockbench/lockbench/internal/config"
)

// pgConfig is the pgx configuration of a client of postgres-1, dialling
// through env.
func pgConfig(env Env, connectTimeout config.Duration) (*pgx.ConnConfig, error) {
	return pgConfigFor(env, "postgres-1", connectTimeout)
}

// pgConfigFor is pgConfig for the server (or pooler) named server; with
// several, the client tries them in turn and keeps the one that accepts
// writes (the primary, after a failover the promoted standby).
func pgConfigFor(env Env, server string, connectTimeout config.Duration, more ...string) (*pgx.ConnConfig, error) {
	var hosts, ports []string
	for _, name := range append([]string{server}, more...) {
		addr, ok := env.Endpoints[name]
		if !ok {
			return nil, fmt.Errorf("no endpoint for %s", name)
		}
		h, p, _ := strings.Cut(addr, ":")
		hosts, ports = append(hosts, h), append(ports, p)
	}
	host, port := strings.Join(hosts, ","), strings.Join(ports, ",")
	dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port)
	if len(more) > 0 {
		dsn += " target_session_attrs=read-write"
	}
	if connectTimeout > 0 {
		dsn += fmt.Sprintf(" connect_timeout=%d", max(1, int(connectTimeout.D().Seconds())))
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres config: %w", err)
	}
	cfg.DialFunc = pgconn.DialFunc(env.Dialer())
	return cfg, withCredentials(cfg, host, env.Credentials("postgres"))
}

// PostgresConfig is the pgx configuration of an administrator's
// connection to one PostgreSQL server (the harness's own, as a fault's
// observation makes): user postgres on database postgres, or what the
// targets file's credentials say.
func PostgresConfig(addr string, creds *Credentials, connectTimeout time.Duration) (*pgx.ConnConfig, error) {
	host, port, _ := strings.Cut(addr, ":")
	dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=%d", host, port, max(1, int(connectTimeout.Seconds())))
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres config: %w", err)
	}
	return cfg, withCredentials(cfg, host, creds)
}

// withCredentials sets a targets file's credentials on cfg (none: nil).
func withCredentials(cfg *pgx.ConnConfig, host string, creds *Credentials) error {
	if creds != nil {
		if u := creds.Username(); u != "" {
			cfg.User = u
		}
		if creds.Database != "" {
			cfg.Database = creds.Database
		}
		cfg.Password = creds.Password()
		tlsCfg, err := creds.TLSConfig()
		if err != nil {
			return err
		}
		if tlsCfg != nil {
			if tlsCfg.ServerName == "" {
				tlsCfg.ServerName = host
			}
			cfg.TLSConfig = tlsCfg
		}
	}
	return nil
}

// pgOnce runs DDL statements once per instance (under name in
// env.Shared). Instances race, and IF NOT EXISTS can still collide in the
// catalog, so each statement is tried three times.
func pgOnce(ctx context.Context, env Env, cfg *pgx.ConnConfig, name string, stmts ...string) error {
	_, err := env.Shared.Get(name, func() (any, func() error, error) {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to postgres-1: %w", err)
		}
		defer conn.Close(context.Background())
		for _, st := range stmts {
			for i := 0; ; i++ {
				_, err = conn.Exec(ctx, st)
				if err == nil {
					break
				}
				if i == 2 {
					return nil, nil, fmt.Errorf("%s: %w", st, err)
				}
			}
		}
		return true, nil, nil
	})
	return err
}

// pgServer is the one PostgreSQL server of the database-backed entries.
func pgServer() []ServerSpec {
	return []ServerSpec{{Kind: "postgres", Name: "postgres-1"}}
}

// pgTotals reads every key's counter of lockbench_counter, from the
// coordinator.
func pgTotals(ctx context.Context, env Env) (map[string]int64, error) {
	cfg, err := pgConfig(env, 0)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres-1: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT k, value FROM lockbench_counter")
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no table: no client ever wrote
			return map[string]int64{}, nil
		}
		return nil, fmt.Errorf("read totals: %w", err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read totals: %w", err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read totals: %w", err)
	}
	return out, nil
}

// counterDDL creates the table the database-backed critical sections
// increment.
const counterDDL = "CREATE TABLE IF NOT EXISTS lockbench_counter (k text PRIMARY KEY, value bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 0)"

// randomID is an owner id for a lease row.
func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
