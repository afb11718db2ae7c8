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
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
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
	if os.Getenv("LOCKBENCH_POWERFS_HELPER") == "server" {
		// A server on the layer, as the harness starts one: its own
		// group, parent-death SIGKILL, a file held open and written.
		cmd := exec.Command("sh", "-c", "exec 3>>"+filepath.Join(dir, "redis-1", "aof")+"; while :; do echo x >&3; done")
		p, err := procgroup.StartProcess("redis-1", "r", cmd)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(dir, p.Pid())
		select {}
	}
	fmt.Println(dir)
	select {}
}

// procState is the state letter of process pid ("" when it is gone or
// a zombie: it has let go of everything).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 || f[0] == "Z" {
		return ""
	}
	return f[0]
}

// TestSIGKILLWithALayerLeavesNothingStuck replays the hole of issue 41,
// ten times: a harness SIGKILLed while a server writes on its power-loss
// layer. The server used to inherit /dev/fuse, keep the dead harness's
// FUSE connection alive and hang in uninterruptible sleep on a flush for
// good; now it dies with the harness, and the next run says what it
// repaired (the layer, the data dir).
func TestSIGKILLWithALayerLeavesNothingStuck(t *testing.T) {
	if err := powerfs.Available(); err != nil {
		t.Skip(err)
	}
	// A temp dir of the test's own: another run on the machine sweeps
	// the dead runs' data dirs of /tmp, and would repair these first.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for i := 0; i < 10; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LOCKBENCH_POWERFS_HELPER=server")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		var dir string
		var server int
		if n, _ := fmt.Sscanf(line, "%s %d", &dir, &server); err != nil || n != 2 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper: %q %v", line, err)
		}
		t.Cleanup(func() { powerfs.Sweep(dir); os.RemoveAll(dir) }) // should the test fail: nothing stays stuck
		// Mid-write: the server's file has grown.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			if st, err := os.Stat(filepath.Join(dir, ".disk", "aof")); err == nil && st.Size() > 1000 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server never wrote on its layer")
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		// The server dies with its harness (parent-death SIGKILL); it
		// must not stay in D, waiting on a connection nobody serves.
		var last string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if last = procState(server); last == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: a minute after the SIGKILL the server %d is still there, state %s", i+1, server, last)
			}
		}
		did := cleanStale()
		all := strings.Join(did, "\n")
		if !strings.Contains(all, "unmounted "+filepath.Join(dir, "redis-1")) || !strings.Contains(all, "removed data dir "+dir) {
			t.Errorf("run %d: the next run did not say what it repaired:\n%s", i+1, all)
		}
	}
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
