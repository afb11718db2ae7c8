package backends_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/premise"
)

// pgAlternatives starts one PostgreSQL server and returns a way to open
// clients of a backend on it, each as its own instance.
func pgAlternatives(t *testing.T) (open func(name, options string, ttl time.Duration) (backends.Backend, backends.Locker), env backends.Env) {
	t.Helper()
	cl, err := cluster.New("pgalt", filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	be, _ := backends.New("postgres-lease", func(v any) error { return config.DecodeStrictBytes([]byte("{}"), v, 0) })
	if err := cl.Start(context.Background(), be.Servers()); err != nil {
		t.Fatal(err)
	}
	env = backends.Env{Endpoints: cl.Endpoints()}
	n := 0
	open = func(name, options string, ttl time.Duration) (backends.Backend, backends.Locker) {
		t.Helper()
		b, err := backends.New(name, func(v any) error { return config.DecodeStrictBytes([]byte(options), v, 0) })
		if err != nil {
			t.Fatal(err)
		}
		n++
		shared := backends.NewShared()
		t.Cleanup(func() { shared.Close() })
		l, err := b.Open(context.Background(), backends.Env{Endpoints: cl.Endpoints(), TTL: ttl, Instance: n, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return b, l
	}
	return open, env
}

// TestPostgresAlternatives runs the three database-backed entries against
// a real PostgreSQL: the lease row, the row lock with the work in its
// transaction, and optimistic concurrency.
func TestPostgresAlternatives(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL: not with -short")
	}
	open, env := pgAlternatives(t)
	ctx := context.Background()

	t.Run("postgres-lease", func(t *testing.T) {
		// Acquire, a refused second acquire, a refused forged release and
		// an extension must all come within the lease: each is timed from
		// the acquire, and an attempt whose steps outran the lease (a busy
		// machine) is tried again with a longer one.
		premise.Retry(t, []time.Duration{400 * time.Millisecond, 2 * time.Second, 8 * time.Second}, func(ttl time.Duration) string {
			key := "k-" + ttl.String()
			_, a := open("postgres-lease", "{}", ttl)
			_, b := open("postgres-lease", "{}", ttl)
			// The client gives its lease up 1% early (drift_factor): the
			// premise is that every step came before that.
			valid := ttl - ttl/100
			clock := premise.Start()
			la, err := a.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			late := func(step string) string {
				if ok, e := clock.Within(valid); !ok {
					return fmt.Sprintf("%s came %s after the acquire was sent, past the lease's %s validity", step, e.Round(time.Millisecond), valid)
				}
				return ""
			}
			_, err = b.Acquire(ctx, key)
			if u := late("the second acquire's answer"); u != "" {
				return u
			}
			if !errors.Is(err, backends.ErrNotAcquired) {
				t.Fatalf("second acquire of a held lease: %v, want ErrNotAcquired", err)
			}
			err = b.Release(ctx, b.(backends.Forger).Forge(key))
			if u := late("the forged release's answer"); u != "" {
				return u
			}
			if !errors.Is(err, backends.ErrNotHeld) {
				t.Fatalf("release with a forged owner: %v, want ErrNotHeld", err)
			}
			// The extension's premise is that it was sent in time: it
			// renews from when it was sent.
			if u := late("the extension"); u != "" {
				return u
			}
			err = a.(backends.Extender).Extend(ctx, la)
			if u := late("the extension's answer"); u != "" && err != nil {
				return u
			}
			if err != nil {
				t.Fatalf("extend: %v", err)
			}
			// Let the lease expire without a release: another client takes
			// the row over with a higher token, the old owner's release is
			// refused and its lost signal has fired. Sleeping longer than
			// the lease is always enough, however slow the machine: the
			// row expires a lease after the database received the
			// extension, before its answer came; the client's own validity
			// ran from when it sent it, and its lost channel checks that
			// deadline whenever it is read (Watchdog.Lost), so it is
			// closed here whether or not its timer's goroutine has run.
			time.Sleep(ttl + ttl/4)
			lb, err := b.Acquire(ctx, key)
			if err != nil {
				t.Fatalf("acquire after expiry: %v", err)
			}
			if lb.Token() <= la.Token() {
				t.Errorf("token %d after %d: fencing tokens must grow", lb.Token(), la.Token())
			}
			select {
			case <-la.Lost():
			default:
				t.Error("the expired lease's lost signal has not fired")
			}
			if err := a.Release(ctx, la); !errors.Is(err, backends.ErrNotHeld) {
				t.Errorf("release of an expired, taken-over lease: %v, want ErrNotHeld", err)
			}
			if err := b.Release(ctx, lb); err != nil {
				t.Errorf("release: %v", err)
			}
			return ""
		})
	})

	t.Run("postgres-for-update", func(t *testing.T) {
		be, a := open("postgres-for-update", "{wait: try}", time.Second)
		_, b := open("postgres-for-update", "{wait: try}", time.Second)
		la, err := a.Acquire(ctx, "fu")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, "fu"); !errors.Is(err, backends.ErrNotAcquired) {
			t.Fatalf("second acquire of a locked row: %v, want ErrNotAcquired", err)
		}
		if wrote, err := a.(backends.Store).Work(ctx, la, func() bool { return true }); !wrote || err != nil {
			t.Fatalf("work: %v %v", wrote, err)
		}
		if err := a.Release(ctx, la); err != nil {
			t.Fatalf("commit: %v", err)
		}
		// A holder whose session is ended before it commits loses its
		// work with its lock.
		lb, err := b.Acquire(ctx, "fu")
		if err != nil {
			t.Fatal(err)
		}
		if wrote, err := b.(backends.Store).Work(ctx, lb, func() bool { return true }); !wrote || err != nil {
			t.Fatalf("work: %v %v", wrote, err)
		}
		terminateOthers(t, env)
		if err := b.Release(ctx, lb); !errors.Is(err, backends.ErrNotHeld) {
			t.Errorf("commit after the session was ended: %v, want ErrNotHeld", err)
		}
		totals, err := be.(backends.Verifier).Totals(ctx, env)
		if err != nil || totals["fu"] != 1 {
			t.Errorf("totals %v (%v): want fu=1, the ended session's increment rolled back", totals, err)
		}
	})

	t.Run("postgres-occ", func(t *testing.T) {
		be, a := open("postgres-occ", "{}", time.Second)
		_, b := open("postgres-occ", "{}", time.Second)
		if !backends.IsLockless(be) {
			t.Fatal("postgres-occ must say it takes no lock")
		}
		la, _ := a.Acquire(ctx, "occ")
		lb, err := b.Acquire(ctx, "occ")
		if err != nil {
			t.Fatalf("a lockless acquire failed: %v", err)
		}
		// b reads, writes and commits while a is working on what it read.
		wrote, err := a.(backends.Store).Work(ctx, la, func() bool {
			w, err := b.(backends.Store).Work(ctx, lb, func() bool { return true })
			if !w || err != nil {
				t.Errorf("inner work: %v %v", w, err)
			}
			return true
		})
		if wrote || !errors.Is(err, backends.ErrConflict) {
			t.Fatalf("a compare-and-set on a row changed under it: wrote=%v err=%v, want ErrConflict", wrote, err)
		}
		totals, err := be.(backends.Verifier).Totals(ctx, env)
		if err != nil || totals["occ"] != 1 {
			t.Errorf("totals %v (%v): want occ=1", totals, err)
		}
	})
}

// terminateOthers ends every other client session of the server.
func terminateOthers(t *testing.T, env backends.Env) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+env.Endpoints["postgres-1"]+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"); err != nil {
		t.Fatal(err)
	}
}
