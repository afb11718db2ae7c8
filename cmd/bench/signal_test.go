package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lockbench/lockbench/internal/exitcode"
)

// TestSecondSignalIsNotATeardown: exit 105 says everything was torn down,
// so a second SIGINT, which exits before the teardown is done, exits 1
// and says the teardown was abandoned.
func TestSecondSignalIsNotATeardown(t *testing.T) {
	if os.Getenv("LOCKBENCH_SIGNAL_CHILD") == "1" {
		ctx, _ := signalContext()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("cancelled") // a teardown that never ends
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalIsNotATeardown$")
	cmd.Env = append(os.Environ(), "LOCKBENCH_SIGNAL_CHILD=1", envBeBench+"=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(out)
	for _, want := range []string{"ready", "cancelled"} {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("child said %q (%v), want %s", line, err, want)
		}
		cmd.Process.Signal(syscall.SIGINT)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != int(exitcode.Harness) {
		t.Errorf("after a second SIGINT: %v, want exit %d, not %d", err, exitcode.Harness, exitcode.Interrupted)
	}
	if !strings.Contains(stderr.String(), "teardown abandoned") {
		t.Errorf("stderr does not say the teardown was abandoned: %q", stderr.String())
	}
}

// TestFailedTeardownIsNotExit105: exit 105 says everything was torn
// down, so a run interrupted whose teardown failed exits 1 and says what
// it could not undo. A real run on Redis is interrupted (one SIGINT)
// while a mount the test made inside its cluster's data dir keeps that
// dir from being removed.
func TestFailedTeardownIsNotExit105(t *testing.T) {
	integration(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting inside the run's data dir needs root")
	}
	tmp := t.TempDir() // the run's data dirs, out of other runs' sweeps
	scen := writeScenario(t, "name: teardown\nworkload: {duration: 2m}\ncases: [{name: a, backend: redis}]\n")
	cmd := exec.Command(os.Args[0], "run", "-dir", filepath.Join(t.TempDir(), "out"), scen)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	errp, err := cmd.StderrPipe() // the run's log
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var stderr strings.Builder
	r := bufio.NewReader(errp)
	for !strings.Contains(stderr.String(), "cluster up") {
		line, err := r.ReadString('\n')
		stderr.WriteString(line)
		if err != nil {
			t.Fatalf("the run ended before its cluster was up: %v\n%s", err, stderr.String())
		}
	}
	rest := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		rest <- string(b)
	}()
	dirs, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("lockbench-data-%d-*", cmd.Process.Pid)))
	if len(dirs) != 1 {
		t.Fatalf("the run's data dirs: %v", dirs)
	}
	busy := filepath.Join(dirs[0], "busy")
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("mount", "-t", "tmpfs", "lockbench-test", busy).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs: %v %s", err, b)
	}
	t.Cleanup(func() {
		exec.Command("umount", busy).Run()
		os.RemoveAll(dirs[0])
	})
	cmd.Process.Signal(syscall.SIGINT)
	stderr.WriteString(<-rest)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != int(exitcode.Harness) {
		t.Errorf("an interrupted run whose teardown failed: %v, want exit %d, not %d\n%s", err, exitcode.Harness, exitcode.Interrupted, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted, and the teardown did not complete") || !strings.Contains(stderr.String(), "remove data dir") {
		t.Errorf("stderr does not say the teardown failed, and what it could not undo:\n%s", stderr.String())
	}
	t.Logf("the run's log:\n%s", stderr.String())
}
