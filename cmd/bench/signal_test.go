package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
