package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/childenv"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
)

// PostgresBin is the directory of PostgreSQL's server binaries: the
// highest major version Debian's packages installed under
// /usr/lib/postgresql, or LOCKBENCH_POSTGRES_BIN. Versions 13 and later
// have every setting lockbench uses.
var PostgresBin = findPostgresBin()

func findPostgresBin() string {
	if d := os.Getenv("LOCKBENCH_POSTGRES_BIN"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestMajor := "/usr/lib/postgresql/15/bin", -1
	for _, d := range dirs {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err == nil && major > bestMajor {
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				best, bestMajor = d, major
			}
		}
	}
	return best
}

func init() {
	RegisterKind(Kind{Name: "postgres", Start: startPostgres, Binary: postgresBinary,
		Version: func() string { return firstLine(filepath.Join(PostgresBin, "postgres"), "--version") },
		Short: func(v string) string {
			if f := strings.Fields(v); len(f) >= 3 && f[0] == "postgres" {
				return "postgresql " + f[2]
			}
			return v
		},
		// Its clock moves for real: libfaketime preloaded into the server
		// moves clock_timestamp() in every backend process.
		Faults:      faults.Abilities{Clock: faults.ClockFaketime, Speaks: faults.ProtoPostgres, Promote: true},
		Credentials: "postgres", Drivers: true,
		Setup:   Setup{Apt: []Package{{Name: "postgresql", Present: "ls /usr/lib/postgresql/*/bin/postgres"}}},
		Compose: "postgres", Kube: "postgres"})
}

func postgresBinary() (string, error) {
	p := filepath.Join(PostgresBin, "postgres")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: no PostgreSQL server under /usr/lib/postgresql/*/bin (looked for %s); install it with `apt-get install -y postgresql` (or run `make setup` as root), or set LOCKBENCH_POSTGRES_BIN", ErrMissingBinary, p)
	}
	if _, err := user.Lookup("postgres"); err != nil {
		return "", fmt.Errorf("%w: no postgres user to run the server as (PostgreSQL refuses root); install the postgresql package", ErrMissingBinary)
	}
	return p, nil
}

// asPostgres runs cmd as the postgres user: the server refuses to run as
// root. The parent-death signal still applies (Go sets it after the
// credential change).
func asPostgres(cmd *exec.Cmd) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	cmd.Env = append(childenv.Env(), "HOME="+u.HomeDir, "LC_ALL=C")
	return nil
}

// startPostgres initialises a private data directory and runs one postgres
// server on its own loopback address. Settings become -c parameters.
func startPostgres(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	if _, err := postgresBinary(); err != nil {
		return err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		ip := s.IP
		if err := os.Chown(s.Dir, uid, gid); err != nil {
			return fmt.Errorf("%s data dir: %w", sp.Name, err)
		}
		data := filepath.Join(s.Dir, "data")
		primary := sp.Settings["standby_of"]
		if primary == "" {
			initdb := exec.Command(filepath.Join(PostgresBin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
			if err := asPostgres(initdb); err != nil {
				return err
			}
			if out, err := initdb.CombinedOutput(); err != nil {
				return fmt.Errorf("initdb for %s: %w\n%s", sp.Name, err, out)
			}
			// Clients connect from their instance's own address: the
			// run's loopback slot, or in hosts mode its switch (a network
			// only the run's namespaces are on); a standby replicates.
			hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return fmt.Errorf("%s pg_hba.conf: %w", sp.Name, err)
			}
			nets := []string{"127.0.0.0/8", c.Slot.Prefix() + "0.0/16"}
			var rules string
			for _, n := range nets {
				rules += "host all all " + n + " trust\nhost replication all " + n + " trust\n"
			}
			_, werr := hba.WriteString(rules)
			if err := errors.Join(werr, hba.Close()); err != nil {
				return fmt.Errorf("%s pg_hba.conf: %w", sp.Name, err)
			}
		} else {
			// A streaming standby: a base backup of the running primary,
			// which writes standby.signal and primary_conninfo (-R).
			p := c.Server(primary)
			if p == nil {
				return fmt.Errorf("%s: no primary %s to replicate", sp.Name, primary)
			}
			phost, pport, _ := strings.Cut(p.Addr, ":")
			bb := exec.Command(filepath.Join(PostgresBin, "pg_basebackup"), "-h", phost, "-p", pport, "-U", "postgres", "-D", data, "-R", "-X", "stream", "--no-sync")
			if err := asPostgres(bb); err != nil {
				return err
			}
			if out, err := bb.CombinedOutput(); err != nil {
				return fmt.Errorf("pg_basebackup for %s from %s: %w\n%s", sp.Name, primary, err, out)
			}
		}
		args := []string{"-D", data, "-p", fmt.Sprint(port), "-k", s.Dir, "-c", "listen_addresses=" + ip, "-c", "fsync=off"}
		if primary != "" {
			// A standby whose primary died retries for WAL every
			// wal_retrieve_retry_interval (5 s by default), and a
			// promotion sometimes waited that long: P4's promote took
			// 5 s in 2 of 3 trials and 0.2 s in the third (2026-12-02).
			args = append(args, "-c", "wal_retrieve_retry_interval=100ms")
		}
		keys := make([]string, 0, len(sp.Settings))
		for k := range sp.Settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "standby_of" {
				continue
			}
			args = append(args, "-c", k+"="+sp.Settings[k])
		}
		s.command = func() (*exec.Cmd, error) {
			cmd := exec.Command(filepath.Join(PostgresBin, "postgres"), args...)
			return cmd, asPostgres(cmd)
		}
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 20*time.Second, func() error {
				out, err := exec.Command(filepath.Join(PostgresBin, "pg_isready"), "-h", ip, "-p", fmt.Sprint(port), "-t", "1").CombinedOutput()
				if err != nil {
					return fmt.Errorf("pg_isready: %s", out)
				}
				// The server answering is the one started: it wrote its
				// pid into this run's data dir.
				pid, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
				if err != nil {
					return err
				}
				if first, _, _ := strings.Cut(string(pid), "\n"); first != fmt.Sprint(p.Pid()) {
					return fmt.Errorf("postmaster.pid names process %s, not the one started (%d)", first, p.Pid())
				}
				return nil
			})
		}
		if err := c.launch(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
