package remote

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// localShell runs commands on this machine with bash, with the places a
// host's notes live in (/run/lockbench, $HOME, /tmp) moved to a directory
// of the test's own, so that the test never touches a real run's.
type localShell struct{ root string }

func (l localShell) String() string { return "local-test-host" }

func (l localShell) Run(ctx context.Context, cmd string) (string, error) {
	// Paths already in the root (NotesDir's answer) stay as they are.
	parts := strings.Split(cmd, l.root)
	for i := range parts {
		if i == 0 {
			parts[i] = strings.ReplaceAll(parts[i], "/run/lockbench/", l.root+"/run/lockbench/")
		}
		parts[i] = strings.ReplaceAll(parts[i], "/tmp/lockbench-stopped-", l.root+"/tmp/lockbench-stopped-")
	}
	cmd = strings.Join(parts, l.root)
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir = l.root
	c.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + l.root + "/home"}
	out, err := c.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(out)), fmt.Errorf("%s: %w (%s)", cmd, &ExitError{Status: ee.ExitCode()}, ee.Stderr)
	}
	return strings.TrimSpace(string(out)), err
}

func newLocalShell(t *testing.T) localShell {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"run", "home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return localShell{root: root}
}

// TestRepairRunsNothingFromNoteNames replays the attack of issue 41: a
// local user of a controlled host plants /tmp/lockbench-stopped-* files
// whose names are shell commands, and a malformed note; the repair runs
// none of them, removes the malformed note, and says so. A genuine note
// of a dead run is acted on: the group resumed, the note removed.
func TestRepairRunsNothingFromNoteNames(t *testing.T) {
	h := newLocalShell(t)
	pwned := filepath.Join(h.root, "pwned")
	// The old repair ran `rm -f <name>` with this name, in the shell's
	// working directory (the test's root): it would have created pwned.
	evil := filepath.Join(h.root, "tmp", "lockbench-stopped-999999-1;touch${IFS}pwned")
	if err := os.WriteFile(evil, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := NotesDir(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, h.root) {
		t.Fatalf("notes directory %s is outside the test's root", dir)
	}
	if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("notes directory %s: %v, %v (want a 0700 directory)", dir, st.Mode(), err)
	}
	bad := filepath.Join(dir, "999999-2;touch${IFS}pwned")
	os.WriteFile(bad, []byte("2"), 0o600)

	// A genuine note: a stopped group of a run that is gone.
	sleeper := exec.Command("sleep", "300")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	pg := sleeper.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pg, syscall.SIGKILL); sleeper.Wait() })
	syscall.Kill(-pg, syscall.SIGSTOP)
	note := filepath.Join(dir, noteName(999999, pg))
	os.WriteFile(note, []byte(fmt.Sprintf("%d\n", pg)), 0o600)

	did, err := Repair(h, func(pid int) bool { return pid != 999999 })
	if err != nil {
		t.Fatalf("repair: %v (did %q)", err, did)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the repair ran a command taken from a note's name")
	}
	all := strings.Join(did, "\n")
	for _, want := range []string{fmt.Sprintf("resumed process group %d", pg), "ignored 1 file(s) /tmp/lockbench-stopped-*", "removed malformed note"} {
		if !strings.Contains(all, want) {
			t.Errorf("the repair did not say %q; it said:\n%s", want, all)
		}
	}
	if _, err := os.Stat(note); err == nil {
		t.Error("the repaired note was not removed: it would fire on every run")
	}
	if _, err := os.Lstat(bad); err == nil {
		t.Error("the malformed note was left in place")
	}
	if _, err := os.Stat(evil); err != nil {
		t.Error("the repair removed a file of another user's in /tmp")
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pg))
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] != "T" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the noted group was not resumed")
		}
	}
	// A second repair finds nothing to do with notes.
	did, err = Repair(h, func(pid int) bool { return pid != 999999 })
	if err != nil || strings.Contains(strings.Join(did, "\n"), "resumed") {
		t.Errorf("a second repair: %q, %v", did, err)
	}
}

// TestNotesDirRefusesAPlantedLink: a notes directory that is a symbolic
// link (planted to make a stop overwrite another file) or open to others
// is refused, and no stop is noted through it.
func TestNotesDirRefusesAPlantedLink(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(notes string) error
	}{
		{"symlink", func(notes string) error {
			os.MkdirAll(filepath.Dir(notes), 0o700)
			return os.Symlink(t.TempDir(), notes)
		}},
		{"world-writable", func(notes string) error {
			if err := os.MkdirAll(notes, 0o700); err != nil {
				return err
			}
			return os.Chmod(notes, 0o777)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLocalShell(t)
			notes := filepath.Join(h.root, "run/lockbench/stopped")
			if os.Geteuid() != 0 {
				notes = filepath.Join(h.root, "home/.cache/lockbench/stopped")
			}
			if err := tc.plant(notes); err != nil {
				t.Fatal(err)
			}
			if d, err := NotesDir(h); err == nil {
				t.Fatalf("a planted notes directory was accepted: %s", d)
			}
			if _, err := Repair(h, func(int) bool { return false }); err == nil {
				t.Error("the repair went ahead through a planted notes directory")
			}
			r := &Proc{h: h, pgid: 1 << 30}
			if err := r.Signal(syscall.SIGSTOP); err == nil {
				t.Error("a stop was noted through a planted notes directory")
			}
		})
	}
}
