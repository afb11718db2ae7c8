//go:build kubernetes

package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/kube"
	"github.com/lockbench/lockbench/internal/wait"
)

// PodShell runs shell commands in a pod's agent container.
type PodShell struct {
	KC    *kube.Client
	Pod   kube.Pod
	Agent string
}

// String names the pod and its agent in messages.
func (h *PodShell) String() string { return "pod " + h.Pod.String() + " (" + h.Agent + ")" }

// Run runs cmd in the agent container through pods/exec (Shell).
func (h *PodShell) Run(ctx context.Context, cmd string) (string, error) {
	out, status, err := h.KC.Shell(ctx, h.Pod, h.Agent, cmd)
	out = strings.TrimSpace(out)
	if err != nil {
		return out, fmt.Errorf("kubernetes %s: %q: %w", h, cmd, err)
	}
	if status != 0 {
		return out, fmt.Errorf("kubernetes %s: %q: %w: %s", h, cmd, &ExitError{Status: status}, out)
	}
	return out, nil
}

// PodProc is a server's process in a pod: stopped, resumed and looked at
// from the agent container as over SSH (remoteProc), killed by deleting
// its pod, and watched through the pod's state.
type PodProc struct {
	*Proc
	KC       *kube.Client
	Pod      kube.Pod
	UID      string // the pod the process runs in
	Restarts int32  // its containers' restarts when the process was found
}

// Kill deletes the pod at once (its containers get SIGKILL: a crash) and
// waits until the API no longer shows that pod.
func (p *PodProc) Kill(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.KC.DeletePod(ctx, p.Pod); err != nil {
		return err
	}
	gone, err := wait.Until(ctx, 100*time.Millisecond, timeout, func() (bool, error) { return p.Gone(ctx), nil })
	if err != nil || !gone {
		return fmt.Errorf("delete pod %s: still there after %s", p.Pod, timeout)
	}
	return nil
}

// Gone reports whether the API says the process's pod is gone: deleted,
// replaced (another uid), being deleted, or its containers restarted.
func (p *PodProc) Gone(ctx context.Context) bool {
	st, err := p.KC.State(ctx, p.Pod)
	switch {
	case errors.Is(err, kube.ErrNotFound):
		return true
	case err != nil:
		return false // no answer is no news
	}
	return st.UID != p.UID || st.Deleting || st.Restarts > p.Restarts
}

// Watch closes done when the pod is gone (seen twice in a row).
func (p *PodProc) Watch(done chan struct{}, stop <-chan struct{}) {
	WatchGone(done, stop, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return p.Gone(ctx)
	})
}
