package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/layout"
)

// TestDriverGetsOnlyItsEnv: a driver inherits none of bench's secrets (an
// SSH key, a password in the environment), only what any program needs,
// lockbench's own tag and its declared env.
func TestDriverGetsOnlyItsEnv(t *testing.T) {
	t.Setenv("LB_SSH_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----secretkey")
	t.Setenv("LB_REDIS_PASSWORD", "hunter2")
	out := filepath.Join(t.TempDir(), "env")
	cfg := Config{Name: "env-dump", Command: []string{"sh", "-c", "env > " + out}, Env: []string{"DECLARED=yes"}, StartTimeout: time.Minute}
	if p, err := Start(context.Background(), cfg); err == nil {
		p.Close()
		t.Fatal("a driver that exits before its hello started")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, bad := range []string{"secretkey", "hunter2", "LB_SSH_KEY", "LB_REDIS_PASSWORD"} {
		if strings.Contains(env, bad) {
			t.Errorf("the driver inherited %q:\n%s", bad, env)
		}
	}
	for _, want := range []string{"DECLARED=yes\n", EnvTag + "=", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("the driver's environment lacks %q:\n%s", want, env)
		}
	}
}

// TestFloodAfterHelloNeverPanics replays the attack of issue 41: a driver
// that floods lines right after its hello panicked its reader in 2 runs of
// 3. Ten runs: each breaks the driver with a message, none panics.
func TestFloodAfterHelloNeverPanics(t *testing.T) {
	for i := 0; i < 10; i++ {
		p, err := Start(context.Background(), fakeConfig(t, "flood-hello"))
		if err != nil {
			continue // broken before its start returned: refused, not a panic
		}
		select {
		case <-p.Broken():
		case <-time.After(time.Minute):
			t.Fatal("a flooding driver was not broken")
		}
		p.Close()
	}
}

// TestSetsidChildIsEnded: a child the driver put in a session of its own
// is ended with it, and Close says so.
func TestSetsidChildIsEnded(t *testing.T) {
	p, err := Start(context.Background(), fakeConfig(t, "setsid"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); len(Leftovers(p.Tag())) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the driver's setsid child never started")
		}
	}
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "left processes") {
		t.Errorf("Close: %v, want it to say the driver left processes", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		left := Leftovers(p.Tag())
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the driver outlived it", left)
		}
	}
}

// TestStderrIsCapped: a driver's stderr, a 2 MB line and 3 MB of lines,
// reaches the log cut and capped, and the driver never blocks on it.
func TestStderrIsCapped(t *testing.T) {
	var log lockedBuffer
	cfg := fakeConfig(t, "stderr-flood")
	cfg.Log = &log
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ping(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	<-p.Exited()
	if n := log.Len(); n > MaxStderr+64<<10 {
		t.Errorf("%d bytes of stderr reached the log (cap %d)", n, MaxStderr)
	}
	if s := log.String(); !strings.Contains(s, "[cut]") || !strings.Contains(s, "the rest is dropped") {
		t.Errorf("the log does not say the stderr was cut and dropped: %.200s", s)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Len() }

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestDriverSecretsNeverLogged: a driver that prints the secret of its
// env: on stderr (and a URL holding it) and in its error leaves it in
// neither the log nor the error that quotes it.
func TestDriverSecretsNeverLogged(t *testing.T) {
	const secret = "tok-7f3a9c2e-secret"
	var log lockedBuffer
	cfg := fakeConfig(t, "leak")
	cfg.Env = append(cfg.Env, "LEAK_TOKEN="+secret)
	cfg.Log = &log
	p, err := Start(context.Background(), cfg)
	if err == nil {
		p.Close()
		t.Fatal("started")
	}
	for where, s := range map[string]string{"the error": err.Error(), "the log": log.String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, layout.Redacted) {
			t.Errorf("%s: %q, want the secret redacted", where, s)
		}
	}
	if !strings.Contains(log.String(), "redis://user:[redacted]@127.0.0.1:6379") {
		t.Errorf("the log lost what it said around the secret: %q", log.String())
	}
}
