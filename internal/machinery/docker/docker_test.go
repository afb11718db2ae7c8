package docker

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRunQuotesWhatFailed: a failed command's error names it and says
// what the CLI said (or that there is none).
func TestRunQuotesWhatFailed(t *testing.T) {
	_, err := Run("no-such-subcommand-of-lockbench")
	if err == nil {
		t.Fatal("a bad subcommand succeeded")
	}
	if !strings.Contains(err.Error(), "docker no-such-subcommand-of-lockbench") {
		t.Errorf("the error does not name the command: %v", err)
	}
	if _, lerr := exec.LookPath("docker"); lerr != nil && !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("without docker, the error should say so: %v", err)
	}
}
