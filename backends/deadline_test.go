package backends_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// TestAcquireHonoursDeadline: while one client holds the lock, another's
// acquire returns by its deadline on every backend. A client library call
// that ignores its context (Consul's blocking query waits 15s unless told
// otherwise) keeps a worker past its acquire timeout and past the end of
// its case, where the harness has to kill it.
func TestAcquireHonoursDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every backend's servers")
	}
	tests := []struct{ backend, options string }{
		{"redis", "{}"},
		{"redlock", "{}"},
		{"redis-sentinel", "{}"},
		{"etcd", "{}"},
		{"zookeeper", "{}"},
		{"consul", "{session_ttl: 10s, lock_delay: 1ms}"},
		{"postgres", "{}"},
	}
	const deadline = time.Second
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			be, cl := startBackend(t, "deadlinetest", tt.backend, tt.options)
			ctx := context.Background()
			shared := backends.NewShared()
			defer shared.Close()
			open := func(instance int) backends.Locker {
				l, err := be.Open(ctx, backends.Env{Endpoints: cl.Endpoints(), TTL: time.Minute, Instance: instance, Shared: shared})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}
			holder, waiter := open(1), open(2)
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			lease, err := holder.Acquire(actx, "k0")
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(ctx, lease)
			wctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			got, err := waiter.Acquire(wctx, "k0")
			took := time.Since(start)
			if err == nil {
				waiter.Release(ctx, got)
				t.Fatal("a second client was granted a held lock")
			}
			if !errors.Is(err, backends.ErrNotAcquired) && !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("acquire ended with %v", err)
			}
			// The deadline plus one round trip and a blocking query's
			// jitter (Consul adds up to wait/16), with 20 s of a busy
			// machine's slack: what this guards against, a wait past the
			// deadline for the holder's lease of a minute, is far beyond.
			if took > deadline+20*time.Second {
				t.Errorf("acquire with a %s deadline returned after %s", deadline, took.Round(time.Millisecond))
			}
		})
	}
}
