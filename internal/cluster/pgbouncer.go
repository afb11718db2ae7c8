package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
)

// PgBouncer is Debian's pgbouncer, a connection pooler in front of the
// case's PostgreSQL server. Its pool_mode setting (transaction by default)
// decides what a client's "session" is.
const PgBouncer = "/usr/sbin/pgbouncer"

func init() {
	RegisterKind(Kind{Name: "pgbouncer", Start: startPgBouncer, Binary: pgbouncerBinary,
		Version: func() string { return firstLine(PgBouncer, "--version") },
		// A pooler: the clock and the standby are its server's.
		Faults:      faults.Abilities{Clock: faults.ClockNone},
		Credentials: "postgres", Drivers: true,
		Setup:       Setup{Apt: []Package{{Name: "pgbouncer", Present: "command -v pgbouncer || [ -x /usr/sbin/pgbouncer ]"}}},
		NotDeployed: "the pooler runs only where lockbench starts its PostgreSQL (a targets file names its own pooler as a server)"})
}

func pgbouncerBinary() (string, error) {
	if _, err := os.Stat(PgBouncer); err != nil {
		return "", fmt.Errorf("%w: %s; install it with `apt-get install -y pgbouncer` (or run `make setup` as root)", ErrMissingBinary, PgBouncer)
	}
	return PgBouncer, nil
}

// startPgBouncer runs one pgbouncer per spec in front of the server named
// by its "upstream" setting (default postgres-1), trusting every user as the
// server does.
func startPgBouncer(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	if _, err := pgbouncerBinary(); err != nil {
		return err
	}
	for _, sp := range specs {
		upName := sp.Settings["upstream"]
		if upName == "" {
			upName = "postgres-1"
		}
		up := c.Server(upName)
		if up == nil {
			return fmt.Errorf("%s: no upstream server %s", sp.Name, upName)
		}
		uhost, uport, _ := net.SplitHostPort(up.Addr)
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		mode := sp.Settings["pool_mode"]
		if mode == "" {
			mode = "transaction"
		}
		pool := sp.Settings["default_pool_size"]
		if pool == "" {
			pool = "4"
		}
		users := filepath.Join(s.Dir, "userlist.txt")
		conf := filepath.Join(s.Dir, "pgbouncer.ini")
		ini := []string{
			"[databases]",
			fmt.Sprintf("postgres = host=%s port=%s dbname=postgres user=postgres", uhost, uport),
			"[pgbouncer]",
			"listen_addr = " + s.IP,
			fmt.Sprintf("listen_port = %d", port),
			"auth_type = trust",
			"auth_file = " + users,
			"pool_mode = " + mode,
			"default_pool_size = " + pool,
			"max_client_conn = 2000",
			"unix_socket_dir =",
			"ignore_startup_parameters = extra_float_digits,application_name",
		}
		if err := os.WriteFile(conf, []byte(strings.Join(ini, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("%s config: %w", sp.Name, err)
		}
		if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
			return fmt.Errorf("%s users: %w", sp.Name, err)
		}
		s.command = func() (*exec.Cmd, error) {
			cmd := exec.Command(PgBouncer, conf)
			return cmd, asPostgres(cmd) // it refuses to run as root
		}
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 20*time.Second, func() error {
				conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
				if err != nil {
					return err
				}
				return conn.Close()
			})
		}
		if err := c.launch(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
