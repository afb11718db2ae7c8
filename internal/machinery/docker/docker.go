// Package docker runs the Docker CLI: the one way lockbench drives the
// engine of a compose topology (containers paused, killed, started,
// inspected; worker instances run as containers).
package docker

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Run runs the docker CLI with args and returns its trimmed output (stdout
// and stderr together); a failure quotes the command and what it said.
func Run(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(bytes.TrimSpace(out)), nil
}

// Pid is the pid of a container's main process on this machine ("0" when
// it is not running), through which its namespaces are entered.
func Pid(container string) (string, error) {
	return Run("inspect", "-f", "{{.State.Pid}}", container)
}
