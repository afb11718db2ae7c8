package layout

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunJSONHoldsNoSecret replays the leak of issue 41: a targets file's
// start: command with --requirepass and a driver's env: end up in
// run.json; none of their secrets does, and the file is its user's alone.
func TestRunJSONHoldsNoSecret(t *testing.T) {
	scenario := `name: s
cases:
  - name: c
    backend: "driver:x"
    driver:
      command: [python3, d.py, --password, hunter2-a]
      env: [REDIS_PASSWORD=hunter2-b, PYTHONPATH=/opt/lib, OTHER=hunter2-c]
    options: {url: "redis://:hunter2-d@127.0.0.1:6379"}
`
	targets := map[string]any{"control": map[string]any{"redis-1": map[string]any{
		"start": "redis-server --port 6379 --requirepass hunter2-e --masterauth 'hunter2-f'",
		"env":   map[string]any{"A": "hunter2-g"},
		"cmd":   "redis-cli -a hunter2-h ping; PGPASSWORD=hunter2-i psql"}}}
	dir := t.TempDir()
	r := &Run{Scenario: "s", ScenarioText: scenario, Targets: targets, Rerun: "bench run x.yaml"}
	if err := WriteRun(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") {
		t.Errorf("run.json holds a secret:\n%s", b)
	}
	for _, keep := range []string{"PYTHONPATH=/opt/lib", "--port 6379", "127.0.0.1:6379", "REDIS_PASSWORD=" + Redacted} {
		if !strings.Contains(string(b), keep) {
			t.Errorf("run.json lost %q:\n%s", keep, b)
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, RunFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("run.json is %s, want 0600", st.Mode().Perm())
	}
	if r.ScenarioText != scenario {
		t.Error("WriteRun changed the caller's Run")
	}
	// A scenario with no secret is recorded as it is, byte for byte.
	plain := "name: p # a comment\ncases: [{name: c, backend: redis, options: {fencing: token}}]\n"
	if got := RedactYAML(plain); got != plain {
		t.Errorf("a scenario without secrets was changed:\n%s", got)
	}
}

// TestResultsAreTheUsersAlone: a results folder is made 0700 and Seal
// makes what is in it 0600, whatever the umask; -shared-results keeps
// the old modes.
func TestResultsAreTheUsersAlone(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	dir, err := New(root, "s", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "logs"), 0o777)
	os.WriteFile(filepath.Join(dir, "logs", "redis-1.log"), []byte("x"), 0o666)
	if err := Seal(dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "logs"): 0o700, filepath.Join(dir, "logs", "redis-1.log"): 0o600} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %s", p, st.Mode().Perm(), err, want)
		}
	}
	Shared = true
	defer func() { Shared = false }()
	claimed := filepath.Join(root, "shared")
	if err := Claim(claimed, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(claimed); st.Mode().Perm() != 0o755 {
		t.Errorf("a shared results folder is %s", st.Mode().Perm())
	}
}

// TestRedactorTakesTheValuesOut: the secrets of an env are taken out of
// printed text wherever they stand; search paths, LOCKBENCH_* settings
// and values too short to be told from words stay.
func TestRedactorTakesTheValuesOut(t *testing.T) {
	r := NewRedactor([]string{"API_TOKEN=abc123secret", "LONGER=abc123secret-and-more", "PYTHONPATH=/opt/lib", "LOCKBENCH_DRIVERS=/opt/drivers", "FLAG=1", "BAD"})
	got := r.Redact("token abc123secret-and-more then abc123secret in /opt/lib and /opt/drivers, 1 try, --password hunter2")
	want := "token [redacted] then [redacted] in /opt/lib and /opt/drivers, 1 try, --password [redacted]"
	if got != want {
		t.Errorf("redacted:\n%q\nwant\n%q", got, want)
	}
	var none *Redactor
	if got := none.Redact("PGPASSWORD=x y"); got != "PGPASSWORD=[redacted] y" {
		t.Errorf("a nil Redactor: %q", got)
	}
}
