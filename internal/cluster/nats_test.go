package cluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lockbench/lockbench/backends"
)

// TestNATSKeepsItsStreamAcrossAKill starts a real nats-server with
// JetStream, publishes to a file-backed stream, kills the server with
// SIGKILL and starts it again on the same store: the messages are still
// there, and the server answering is the run's (its name read back).
func TestNATSKeepsItsStreamAcrossAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server: not with -short")
	}
	if _, err := natsBinary(); err != nil {
		t.Fatalf("%v (make setup installs it)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := NewWith("natstest", filepath.Join(t.TempDir(), "logs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Start(ctx, []backends.ServerSpec{{Kind: "nats", Name: "nats-1"}}); err != nil {
		t.Fatal(err)
	}
	addr := c.Server("nats-1").Addr
	count := func(publish bool) uint64 {
		t.Helper()
		nc, err := nats.Connect("nats://"+addr, nats.Timeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if got, want := nc.ConnectedServerName(), natsName(c.RunID, "nats-1"); got != want {
			t.Errorf("server name %q, want %q", got, want)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if publish {
			for i := 0; i < 10; i++ {
				if _, err := js.Publish(ctx, "t", []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			return 10
		}
		return info.State.Msgs
	}
	if n := count(true); n != 10 {
		t.Fatalf("published %d", n)
	}
	if err := c.Kill("nats-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, "nats-1"); err != nil {
		t.Fatal(err)
	}
	if n := count(false); n != 10 {
		t.Errorf("after a kill and a restart the stream holds %d messages, want the 10 published", n)
	}
}
