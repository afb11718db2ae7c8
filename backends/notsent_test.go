package backends

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbench/lockbench/internal/premise"
	"github.com/redis/go-redis/v9"
)

// TestNotSent: a redis operation whose dials are refused surely never
// sent its request (ErrNotSent, MODEL A1: unsent); one written to a server
// that never answers may have taken effect, and is not claimed.
func TestNotSent(t *testing.T) {
	// a port nothing listens on: every dial is refused
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	// a server that reads and never answers
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 4096)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
				}
			}()
		}
	}()
	// Each operation is given a deadline; the premise of the mute
	// server's is that the request was written before it (a machine too
	// slow to dial and write in time leaves nothing sent, which is not
	// what is tested there): unmet, the deadline is made longer.
	premise.Retry(t, []time.Duration{300 * time.Millisecond, 2 * time.Second, 8 * time.Second}, func(deadline time.Duration) string {
		for _, tc := range []struct {
			addr    string
			notSent bool
		}{{refused, true}, {mute.Addr().String(), false}} {
			env := Env{Shared: NewShared(), TTL: time.Second}
			sent := sentCounter(env)
			var d net.Dialer
			c := redis.NewClient(&redis.Options{Addr: tc.addr, Dialer: sent.dial(d.DialContext), MaxRetries: 2,
				ContextTimeoutEnabled: true, DialTimeout: time.Second})
			l := &redisExtLocker{&redisLocker{c: c, mode: redisSafe, ttl: time.Second, sent: sent}}
			var unwritten []string
			op := func(what string, f func(ctx context.Context) error) error {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				before := sent.mark()
				err := f(ctx)
				if sent.mark() == before {
					unwritten = append(unwritten, what)
				}
				return err
			}
			errs := map[string]error{
				"acquire": op("acquire", func(ctx context.Context) error { _, err := l.Acquire(ctx, "k"); return err }),
				"extend": op("extend", func(ctx context.Context) error {
					return l.Extend(ctx, &redisLease{key: "k", value: "v", wd: NewWatchdog(time.Second)})
				}),
				"release": op("release", func(ctx context.Context) error { return l.Release(ctx, &redisLease{key: "k", value: "v"}) }),
			}
			c.Close()
			if !tc.notSent && len(unwritten) > 0 {
				return fmt.Sprintf("%v wrote nothing to the mute server before their %s deadline", unwritten, deadline)
			}
			for what, err := range errs {
				if err == nil || errors.Is(err, ErrNotSent) != tc.notSent || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNotHeld) {
					t.Errorf("%s at %s: %v; want an error, not sent: %v", what, tc.addr, err, tc.notSent)
				}
			}
		}
		return ""
	})
}

// TestPgLeaseNotSent: a postgres-lease operation that could not connect
// never wrote its statement (ErrNotSent).
func TestPgLeaseNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cfg, err := pgx.ParseConfig("host=127.0.0.1 port=" + port + " user=postgres dbname=postgres sslmode=disable connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgLeaseLocker{cfg: cfg, ttl: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, aerr := p.Acquire(ctx, "k")
	rerr := p.Release(ctx, &pgLeaseLease{key: "k", owner: "o"})
	eerr := p.Extend(ctx, &pgLeaseLease{key: "k", owner: "o"})
	for what, err := range map[string]error{"acquire": aerr, "release": rerr, "extend": eerr} {
		if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNotHeld) {
			t.Errorf("%s: %v, want ErrNotSent", what, err)
		}
	}
}
