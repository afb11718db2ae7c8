package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
