package backends_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
)

// The lost-signal test runs the lock holder in a child process (this test
// binary, re-executed) so that SIGSTOP freezes it whole, lease keep-alives
// included, as a GC pause would.
const envChild = "LOCKBENCH_LOST_CHILD"

type childConfig struct {
	Backend   string            `json:"backend"`
	Options   string            `json:"options"`
	Endpoints map[string]string `json:"endpoints"`
	TTL       time.Duration     `json:"ttl"`
	Wait      time.Duration     `json:"wait"`
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envChild); cfg != "" {
		os.Exit(child(cfg))
	}
	os.Exit(m.Run())
}

// child acquires one lease, says so, and reports whether its Lost channel
// closed within cfg.Wait.
func child(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	be, err := backends.New(cfg.Backend, func(v any) error { return config.DecodeStrictBytes([]byte(cfg.Options), v, 0) })
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx := context.Background()
	shared := backends.NewShared()
	defer shared.Close()
	l, err := be.Open(ctx, backends.Env{Endpoints: cfg.Endpoints, TTL: cfg.TTL, Instance: 1, Shared: shared})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	lease, err := l.Acquire(actx, "k0")
	cancel()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("acquired", lease.Token())
	select {
	case <-lease.Lost():
		fmt.Println("lost")
	case <-time.After(cfg.Wait):
		fmt.Println("never")
	}
	return 0
}

// TestEveryBackendDeclaresItsPause: every registered backend says beside
// itself (backends.Info.Paused) what its holder shows when it is paused
// beyond its lease and resumed, or why TestLostSignalAfterPause does not
// try it: a new backend is tried against its servers from its
// registration alone.
func TestEveryBackendDeclaresItsPause(t *testing.T) {
	for _, info := range backends.All() {
		p := info.Paused
		switch {
		case p.Excused != "" && p.Shows != "":
			t.Errorf("backend %s: Paused says both what it shows and why it is excused", info.Name)
		case p.Excused == "" && p.Shows != backends.PauseLost && p.Shows != backends.PauseKept:
			t.Errorf("backend %s: declare in its registration what a paused holder shows (Paused: backends.Paused{Shows: PauseLost or PauseKept}), or why it is not tried so (Paused.Excused)", info.Name)
		}
	}
}

// TestLostSignalAfterPause: every registered backend's holder, paused
// beyond the expiry bound and resumed, shows what its registration says
// (backends.Info.Paused): a lease-based lock's learns that its lease is
// lost; one without a lease (PostgreSQL's advisory lock) keeps the lock,
// with no signal.
func TestLostSignalAfterPause(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers: not with -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (make setup): %v", err)
	}
	for _, info := range backends.All() {
		t.Run(info.Name, func(t *testing.T) {
			decl := info.Paused
			if decl.Excused != "" {
				t.Skip("excused: " + decl.Excused)
			}
			pause, options, wantLost := decl.For, decl.Options, decl.Shows == backends.PauseLost
			if pause == 0 {
				pause = 3 * time.Second
			}
			if options == "" {
				options = "{}"
			}
			_, cl := startBackend(t, "losttest", info.Name, options)
			// The child's wait starts before the pause and must outlast it.
			wait := pause + 40*time.Second
			if !wantLost {
				wait = pause + 5*time.Second
			}
			cfg, _ := json.Marshal(childConfig{Backend: info.Name, Options: options, Endpoints: cl.Endpoints(), TTL: 2 * time.Second, Wait: wait})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envChild+"="+string(cfg))
			cmd.Stderr = os.Stderr
			out, err := procgroup.OutputPipe(cmd) // read to EOF: the answer is the child's last line
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			p, err := procgroup.StartProcess("holder", "losttest", cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill(5 * time.Second)
			lines := make(chan string, 4)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			first := next(t, lines, 40*time.Second)
			if !strings.HasPrefix(first, "acquired") {
				t.Fatalf("holder: %q", first)
			}
			if err := p.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(pause)
			if err := p.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			resumed := time.Now()
			got := next(t, lines, wait+10*time.Second)
			switch {
			case wantLost && got != "lost":
				t.Errorf("after a %s pause the holder says %q; its registration says it shows the lease-lost signal (Paused)", pause, got)
			case !wantLost && got != "never":
				t.Errorf("after a %s pause the holder says %q; its registration says it keeps the lock, with no signal (Paused)", pause, got)
			case wantLost:
				t.Logf("%s: lost signal %s after resuming", info.Name, time.Since(resumed).Round(time.Millisecond))
			}
		})
	}
}

func next(t *testing.T, lines <-chan string, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("holder exited without answering")
		}
		return l
	case <-time.After(d):
		t.Fatalf("holder silent for %s", d)
	}
	return ""
}
