package driver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Echo is a running bare echo (EchoCommand): the same pipes between the
// same two runtimes as a driver's, with nothing of the protocol behind
// them, so that its round trip is what the hop cannot go below.
type Echo struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	n   int
}

// StartEcho starts the bare echo of runtime.
func StartEcho(ctx context.Context, runtime string) (*Echo, error) {
	argv, env, err := EchoCommand(runtime)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("echo of %s: %w", runtime, err)
	}
	return &Echo{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

// Ping writes one line shaped as a protocol ping and waits for it back.
func (e *Echo) Ping() (time.Duration, error) {
	e.n++
	line := []byte(`{"type":"ping","id":` + strconv.Itoa(e.n) + "}\n")
	start := time.Now()
	if _, err := e.in.Write(line); err != nil {
		return 0, fmt.Errorf("echo: write: %w", err)
	}
	got, err := e.out.ReadSlice('\n')
	if err != nil {
		return 0, fmt.Errorf("echo: read: %w", err)
	}
	d := time.Since(start)
	if string(got) != string(line) {
		return 0, fmt.Errorf("echo: sent %q, read %q", line, got)
	}
	return d, nil
}

// Close ends the echo (its stdin closed) and waits for it.
func (e *Echo) Close() error {
	e.in.Close()
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("echo: %w", err)
		}
		return err
	case <-time.After(5 * time.Second):
		e.cmd.Process.Kill()
		return errors.New("echo: did not exit when its stdin closed")
	}
}
