package backends_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockbench/lockbench/backends"
)

// TestConsulReleaseSaysWhatConsulSaid: a release is ok only if Consul
// released the key for this session. A holder whose session ended behind
// its back (here destroyed; in a run, expired while the holder was
// paused) is told its release found the lock not held, even before its
// lost signal fires: api.Lock's Unlock threw Consul's answer away and
// reported success. An ordinary release frees the key for the next client.
func TestConsulReleaseSaysWhatConsulSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Consul cluster")
	}
	be, cl := startBackend(t, "consulrelease", "consul", "{session_ttl: 10s, lock_delay: 1ms}")
	ctx := context.Background()
	shared := backends.NewShared()
	defer shared.Close()
	l, err := be.Open(ctx, backends.Env{Endpoints: cl.Endpoints(), TTL: 10 * time.Second, Instance: 1, Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	admin, err := api.NewClient(&api.Config{Address: cl.Endpoints()["consul-1"]})
	if err != nil {
		t.Fatal(err)
	}
	acquire := func() backends.Lease {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		lease, err := l.Acquire(actx, "k0")
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	release := func(lease backends.Lease) error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return l.Release(rctx, lease)
	}

	lease := acquire()
	if err := release(lease); err != nil {
		t.Fatalf("release of a held lock: %v", err)
	}
	lease = acquire() // the key was freed
	pair, _, err := admin.KV().Get("lockbench/lock/k0", nil)
	if err != nil || pair == nil || pair.Session == "" {
		t.Fatalf("the lock's key: %+v, %v", pair, err)
	}
	if _, err := admin.Session().Destroy(pair.Session, nil); err != nil {
		t.Fatal(err)
	}
	if err := release(lease); !errors.Is(err, backends.ErrNotHeld) {
		t.Errorf("release after the session ended: %v, want %v", err, backends.ErrNotHeld)
	}
}
