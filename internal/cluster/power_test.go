package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/powerfs"
	"github.com/lockbench/lockbench/internal/wait"
	"github.com/redis/go-redis/v9"
)

// TestPowerLossTakesWhatWasNeverFsynced runs a real Redis on the power-loss
// layer, writes keys, loses power right after the last reply and starts it
// again on what was durable: with appendfsync everysec some acknowledged
// keys are gone, with always none is. (With everysec, Redis fsyncs at the
// first write of each second; the writes after it wait for the next one.)
func TestPowerLossTakesWhatWasNeverFsynced(t *testing.T) {
	if err := powerfs.Available(); err != nil {
		t.Skip(err)
	}
	if _, err := redisBinary(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		persistence string
		wantLost    bool
	}{{"everysec", true}, {"always", false}} {
		t.Run(tc.persistence, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := NewWith("powertest", filepath.Join(t.TempDir(), "logs"), Options{DiskLayer: true})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Close(); err != nil {
					t.Error(err)
				}
				// Nothing of the layer outlives the cluster.
				if left, err := powerfs.Mounted(c.dataDir); err != nil || len(left) > 0 {
					t.Errorf("mounts left behind: %v (%v)", left, err)
				}
			}()
			if err := c.Start(ctx, []backends.ServerSpec{{Kind: "redis", Name: "redis-1", Persistence: tc.persistence}}); err != nil {
				t.Fatal(err)
			}
			addr := c.Server("redis-1").Addr
			rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer rc.Close()
			const n = 300
			for i := 0; i < n; i++ {
				if err := rc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			loss, err := c.PowerLoss("redis-1")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Restart(ctx, "redis-1"); err != nil {
				t.Fatal(err)
			}
			kept, err := rc.DBSize(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d of %d acknowledged keys kept; the layer discarded %d bytes in %d files", tc.persistence, kept, n, loss.Bytes, loss.Files)
			if lost := kept < n; lost != tc.wantLost {
				t.Errorf("%s: %d of %d keys after the power loss (%d bytes discarded); want lost=%v", tc.persistence, kept, n, loss.Bytes, tc.wantLost)
			}
			if !tc.wantLost && loss.Bytes != 0 {
				t.Errorf("always: %d bytes were pending though every write is fsynced before its reply", loss.Bytes)
			}
		})
	}
}

// powerChild acts as a harness that mounts a layer and waits to be
// SIGKILLed (TestStaleLayerIsSweptByTheNextRun; TestMain calls it).
func powerChild() {
	dir, err := os.MkdirTemp("", fmt.Sprintf("lockbench-data-%d-", os.Getpid()))
	if err == nil {
		back, mp := filepath.Join(dir, ".disk"), filepath.Join(dir, "redis-1")
		os.MkdirAll(back, 0o755)
		os.MkdirAll(mp, 0o755)
		_, err = powerfs.Mount(back, mp)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(dir)
	select {}
}

// TestStaleLayerIsSweptByTheNextRun: a harness SIGKILLed with a layer
// mounted leaves a dead mount ("transport endpoint is not connected");
// the next run's CleanStale detaches it and removes the dir.
func TestStaleLayerIsSweptByTheNextRun(t *testing.T) {
	if err := powerfs.Available(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKBENCH_POWERFS_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.HasPrefix(line, "error") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	dir := strings.TrimSpace(line)
	cmd.Process.Kill()
	cmd.Wait()
	if m, _ := powerfs.Mounted(dir); len(m) != 1 {
		t.Fatalf("after the SIGKILL: mounts %v, want the dead one", m)
	}
	CleanStale()
	if m, _ := powerfs.Mounted(dir); len(m) != 0 {
		t.Errorf("after CleanStale: mounts %v", m)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after CleanStale: %s still there (%v)", dir, err)
		os.RemoveAll(dir)
	}
}

// TestDiskFullRefusesRedisWrites: a real Redis with an append-only file on
// a full disk. With everysec it refuses writes with its own error (MISCONF)
// and takes them again once the disk is freed; with always it cannot go on
// and exits (Redis: "Can't recover from AOF write error when the AOF fsync
// policy is 'always'").
func TestDiskFullRefusesRedisWrites(t *testing.T) {
	if err := powerfs.Available(); err != nil {
		t.Skip(err)
	}
	if _, err := redisBinary(); err != nil {
		t.Skip(err)
	}
	for _, persistence := range []string{"everysec", "always"} {
		t.Run(persistence, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := NewWith("disktest", filepath.Join(t.TempDir(), "logs"), Options{DiskLayer: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(ctx, []backends.ServerSpec{{Kind: "redis", Name: "redis-1", Persistence: persistence}}); err != nil {
				t.Fatal(err)
			}
			rc := redis.NewClient(&redis.Options{Addr: c.Server("redis-1").Addr, MaxRetries: -1})
			defer rc.Close()
			if err := rc.Set(ctx, "before", 1, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.DiskFull("redis-1", true); err != nil {
				t.Fatal(err)
			}
			var refusal error
			for i := 0; i < 300 && refusal == nil; i++ {
				refusal = rc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err()
				time.Sleep(10 * time.Millisecond)
			}
			refused, _ := c.DiskRefused("redis-1")
			t.Logf("on a full disk: %v (the layer refused %d writes)", refusal, refused)
			if refusal == nil || refused == 0 {
				t.Fatalf("Redis took 300 writes on a full disk (refusal %v, %d writes refused by the layer)", refusal, refused)
			}
			p := c.Server("redis-1").Process()
			if persistence == "always" {
				if _, err := wait.Until(ctx, 10*time.Millisecond, 5*time.Second, func() (bool, error) { return !p.Alive(), nil }); err != nil || p.Alive() {
					t.Errorf("Redis with appendfsync always still runs on a full disk")
				}
				return
			}
			if !strings.Contains(refusal.Error(), "MISCONF") {
				t.Errorf("refusal %q is not Redis's MISCONF", refusal)
			}
			if _, err := c.DiskFull("redis-1", false); err != nil {
				t.Fatal(err)
			}
			var err2 error
			for i := 0; i < 300; i++ { // Redis tries its AOF write again every second
				if err2 = rc.Set(ctx, "after", 1, 0).Err(); err2 == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err2 != nil || !p.Alive() {
				t.Errorf("after the disk was freed: %v (alive %v)", err2, p.Alive())
			}
		})
	}
}
