package procgroup

import (
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/monoclock"
)

// TestStoppedWithin: a pause is known by when Signal stopped and resumed
// the group, and an interval overlaps it or not.
func TestStoppedWithin(t *testing.T) {
	for _, tt := range []struct {
		name             string
		stopped, resumed int64
		from, to         int64
		want             bool
	}{
		{"never stopped", 0, 0, 10, 20, false},
		{"stopped, not resumed, after", 15, 0, 10, 20, true},
		{"stopped, not resumed, before", 5, 0, 10, 20, true},
		{"stopped after the interval", 25, 0, 10, 20, false},
		{"resumed before the interval", 2, 5, 10, 20, false},
		{"resumed within", 2, 12, 10, 20, true},
		{"stopped and resumed within", 12, 14, 10, 20, true},
		{"stopped again after a resume", 30, 14, 10, 20, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &Process{stoppedAt: tt.stopped, resumedAt: tt.resumed}
			if got := p.StoppedWithin(tt.from, tt.to); got != tt.want {
				t.Errorf("StoppedWithin(%d, %d) with stop %d, resume %d = %v, want %v", tt.from, tt.to, tt.stopped, tt.resumed, got, tt.want)
			}
		})
	}
}

// TestSignalRecordsThePause: SIGSTOP and SIGCONT to a real process group
// are what StoppedWithin reads, and the kernel agrees (Stopped).
func TestSignalRecordsThePause(t *testing.T) {
	p, err := StartProcess("sleeper", "test", exec.Command("sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(5 * time.Second)
	before := monoclock.Now()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !p.StoppedWithin(before, monoclock.Now()) {
		t.Error("not stopped just after SIGSTOP")
	}
	ok := false
	for i := 0; i < 100 && !ok; i++ {
		ok, _ = p.Stopped()
		time.Sleep(10 * time.Millisecond)
	}
	if !ok {
		t.Error("the kernel never reported the group stopped")
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	after := monoclock.Now() + 1
	if p.StoppedWithin(after, after+int64(time.Second)) {
		t.Error("still counted stopped after SIGCONT")
	}
	if !p.StoppedWithin(before, after) {
		t.Error("the pause is forgotten for the interval it was in")
	}
}

// TestOutputPipeKeepsTheLastLines: what a child wrote before it exited is
// read even when the reader only starts after StartProcess's Wait has
// seen the exit (exec.Cmd's StdoutPipe would be closed by then).
func TestOutputPipeKeepsTheLastLines(t *testing.T) {
	cmd := exec.Command("sh", "-c", "printf 'first\\nlast\\n'")
	out, err := OutputPipe(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p, err := StartProcess("printer", "test", cmd)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, err := io.ReadAll(out)
	if err != nil || string(b) != "first\nlast\n" {
		t.Errorf("read %q, %v after the child exited; want both lines", b, err)
	}
}

// TestChildrenInheritNoSecrets: a server or worker started with no
// environment of its own gets none of bench's secrets, and the run id.
func TestChildrenInheritNoSecrets(t *testing.T) {
	t.Setenv("LB_SSH_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----secretkey")
	t.Setenv("PGPASSWORD", "hunter2")
	cmd := exec.Command("env")
	out, err := OutputPipe(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProcess("env", "run-1", cmd)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out)
	<-p.Done()
	env := string(b)
	if strings.Contains(env, "secretkey") || strings.Contains(env, "hunter2") {
		t.Errorf("a child inherited a secret:\n%s", env)
	}
	if !strings.Contains(env, EnvRunID+"=run-1") || !strings.Contains(env, "PATH=") {
		t.Errorf("a child lacks the run id or PATH:\n%s", env)
	}
}
