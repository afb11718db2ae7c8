package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/internal/childenv"
	"github.com/lockbench/lockbench/internal/layout"
)

// EnvTag is set in every driver's environment to a value of its own, so
// that lockbench (and its tests) can tell whether any process of a driver
// outlived it.
const EnvTag = "LOCKBENCH_DRIVER"

// EnvDrivers is set in the environment of a driver of one's own to the
// folder of lockbench's protocol helpers (python/lockbench_driver.py and
// the reference drivers beside it), which `bench driver path` prints too.
const EnvDrivers = "LOCKBENCH_DRIVERS"

// Config says how to start a driver and how patient to be with it.
type Config struct {
	// Name names the driver in every message: the case's backend name
	// ("driver:redis-py@4.3.4"), or its command.
	Name    string
	Command []string
	Env     []string // added to lockbench's environment
	Hello   Hello
	// StartTimeout bounds how long the driver may take to answer its hello.
	StartTimeout time.Duration
	// Grace is how long, past an operation's timeout, the driver may take
	// to answer before it counts as hung. It is counted in the worker's
	// running time: a pause of the whole instance does not use it up.
	Grace time.Duration
	// DefaultTimeout is an operation's timeout when its context has no
	// deadline.
	DefaultTimeout time.Duration
	// Log receives the driver's stderr, each line prefixed with its name.
	Log io.Writer
	// Trace, when set, receives every line to and from the driver, each
	// stamped and marked with its direction (EnvTrace names a file for it).
	Trace io.Writer
}

// EnvTrace, when set in bench's environment, names a file every driver
// appends its protocol trace to: each line lockbench wrote ("->") and read
// ("<-"), with the driver's name and pid and the time.
const EnvTrace = "LOCKBENCH_DRIVER_TRACE"

// Process is a running driver.
type Process struct {
	cfg   Config
	cmd   *exec.Cmd
	stdin io.WriteCloser
	tag   string
	hello Reply

	// writeMu guards the lines waiting for stdin (wbuf) and whether a
	// caller is writing them (writing); writeIdle says when none is.
	writeMu   sync.Mutex
	writeIdle *sync.Cond
	writing   bool
	wbuf      []byte
	wspare    []byte

	mu        sync.Mutex
	nextID    uint64
	pending   map[uint64]*call
	abandoned map[uint64]string
	leases    map[leaseKey]*lease
	lines     int
	closing   bool
	helloCh   chan []byte
	// helloTaken closes once Start has taken the hello's answer: the
	// reader reads nothing more before.
	helloTaken chan struct{}
	// unasked counts the lines that answered no pending request.
	unasked int
	bareCh  chan Reply
	err     error

	traceFile  *os.File
	traceMu    sync.Mutex
	broken     chan struct{}
	exited     chan struct{}
	exitErr    error
	readerDone chan struct{}
	stderr     *tailBuffer
	// redact takes the secrets of the driver's env: out of what it prints
	// (its stderr, in the log and in the errors that quote it).
	redact *layout.Redactor
}

type leaseKey struct {
	client int
	id     string
}

// call is one request waiting for its answer.
type call struct {
	req  Request
	done chan answer
}

// answer is a driver's reply to a call, with the lease an acquire got.
type answer struct {
	reply Reply
	line  int
	lease *lease
}

// Start starts a driver and makes its handshake: lockbench's hello, the
// driver's answer (its library, version and abilities). It fails, naming
// the driver, if the driver exits, refuses its options, answers with
// something else or does not answer within StartTimeout.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if len(cfg.Command) == 0 {
		return nil, fmt.Errorf("driver %s: no command", cfg.Name)
	}
	if cfg.Name == "" {
		cfg.Name = strings.Join(cfg.Command, " ")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cfg.Hello.Type, cfg.Hello.Protocol = TypeHello, Protocol
	if cfg.Hello.Options == nil {
		cfg.Hello.Options = map[string]any{}
	}
	helloLine, err := json.Marshal(cfg.Hello)
	if err != nil {
		return nil, fmt.Errorf("driver %s: encode hello: %w", cfg.Name, err)
	}
	var tb [8]byte
	rand.Read(tb[:])
	p := &Process{cfg: cfg, tag: hex.EncodeToString(tb[:]), pending: map[uint64]*call{}, abandoned: map[uint64]string{},
		leases: map[leaseKey]*lease{}, helloCh: make(chan []byte, 1), helloTaken: make(chan struct{}), broken: make(chan struct{}), exited: make(chan struct{}),
		readerDone: make(chan struct{}), stderr: &tailBuffer{max: 6}, redact: layout.NewRedactor(cfg.Env)}
	p.writeIdle = sync.NewCond(&p.writeMu)
	if cfg.Hello.Bare != nil {
		p.bareCh = make(chan Reply, 1)
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	// Only what any program needs, lockbench's own settings and the
	// driver's declared env: never the worker's credentials or bench's
	// secrets (drivers are not given credentials).
	cmd.Env = append(append(childenv.Env(), cfg.Env...), EnvTag+"="+p.tag)
	// The driver stays in the worker's process group, so that a pause,
	// a kill or a CPU limit of the instance acts on it too; it dies with
	// the worker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cfg.Trace == nil {
		if path := os.Getenv(EnvTrace); path != "" {
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
				cfg.Trace = f // closed when the process exits: see trace
				p.traceFile = f
			}
		}
	}
	p.cfg.Trace = cfg.Trace
	p.stdin, err = cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("driver %s: stdin: %w", cfg.Name, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("driver %s: stdout: %w", cfg.Name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("driver %s: stderr: %w", cfg.Name, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("driver %s: start %s: %w", cfg.Name, strings.Join(cfg.Command, " "), err)
	}
	p.cmd = cmd
	stderrDone := make(chan struct{})
	go func() {
		p.copyStderr(errR)
		close(stderrDone)
	}()
	go func() {
		err := cmd.Wait()
		<-stderrDone // so that a crash's last words are in the tail
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.exited)
		if p.traceFile != nil {
			<-p.readerDone
			p.traceMu.Lock()
			p.traceFile.Close()
			p.traceMu.Unlock()
		}
	}()
	go p.read(outR)
	if err := p.write(helloLine); err != nil {
		p.breakf("could not write its hello: %v", err)
	}
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	var line []byte
	select {
	case line = <-p.helloCh:
	case <-p.broken:
		// A driver that answered and exited at once (a refusal) may be
		// seen gone before its answer is read here: the answer, when it
		// came, says why, whichever of the two this select saw first.
		select {
		case line = <-p.helloCh:
		default:
		}
	case <-timer.C:
		p.breakf("did not answer its hello within %s", cfg.StartTimeout)
	case <-ctx.Done():
		p.breakf("start abandoned: %v", context.Cause(ctx))
	}
	if line != nil {
		r, err := ParseReply(line)
		switch {
		case err != nil:
			p.breakf("line 1 of its output (its answer to hello), %s: %v", quote(line), err)
		case r.Type == TypeError:
			refused := &BrokenError{Driver: cfg.Name, Msg: fmt.Sprintf("refused its start: %s: %s", r.Code, p.redact.Redact(r.Message))}
			p.breakf("%s", refused.Msg)
			p.Close()
			return nil, refused
		case r.Type != TypeHello:
			p.breakf("line 1 of its output is %s %s, not its answer to hello", articleOf(r.Type), r.Type)
		case p.Err() == nil:
			p.mu.Lock()
			p.hello = r
			p.mu.Unlock()
			close(p.helloTaken)
			return p, nil
		}
	}
	err = p.Err()
	p.Close()
	return nil, err
}

// Hello returns the driver's answer to hello.
func (p *Process) Hello() Reply {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hello
}

// Abilities returns what the driver said it can do.
func (p *Process) Abilities() Abilities {
	h := p.Hello()
	if h.Abilities == nil {
		return Abilities{}
	}
	return *h.Abilities
}

// Tag is the value of EnvTag in the driver's environment.
func (p *Process) Tag() string { return p.tag }

// Pid is the driver's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Name names the driver in messages.
func (p *Process) Name() string { return p.cfg.Name }

// Broken is closed when the driver broke: it crashed, hung, or wrote what
// the protocol does not allow. Err says why.
func (p *Process) Broken() <-chan struct{} { return p.broken }

// Err says why the driver broke, or nil.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Exited is closed once the driver's process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// BrokenError says how a driver broke.
type BrokenError struct {
	Driver string
	Msg    string
}

func (e *BrokenError) Error() string { return fmt.Sprintf("driver %s: %s", e.Driver, e.Msg) }

// breakf declares the driver broken (once), wakes every caller and kills
// the process: nothing it says after that counts.
func (p *Process) breakf(format string, args ...any) {
	p.mu.Lock()
	if p.err != nil || (p.closing && p.hello.Type != "") {
		p.mu.Unlock()
		return
	}
	p.err = &BrokenError{Driver: p.cfg.Name, Msg: fmt.Sprintf(format, args...)}
	close(p.broken)
	p.mu.Unlock()
	p.kill()
}

// kill SIGKILLs the driver if it is still running, and every process it
// started, even one that left its group with setsid.
func (p *Process) kill() {
	select {
	case <-p.exited:
	default:
		p.endChildren()
		p.cmd.Process.Kill()
	}
}

// write sends a line to the driver's stdin. Lines that callers give while
// another caller is writing wait for it, and it writes them all at once
// before it returns: under load the driver reads several requests with
// one read, and lockbench makes one write for them. The error of a write
// is the writing caller's; a caller whose line another wrote learns of a
// failed write as every caller does, from the driver breaking.
func (p *Process) write(line []byte) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.trace("->", line)
	p.wbuf = append(append(p.wbuf, line...), '\n')
	if p.writing {
		return nil
	}
	p.writing = true
	defer func() {
		p.writing = false
		p.writeIdle.Broadcast()
	}()
	for len(p.wbuf) > 0 {
		buf := p.wbuf
		p.wbuf = p.wspare[:0]
		p.writeMu.Unlock()
		_, err := p.stdin.Write(buf)
		p.writeMu.Lock()
		p.wspare = buf[:0]
		if err != nil {
			p.wbuf = p.wbuf[:0]
			return err
		}
	}
	return nil
}

// trace records a line of the protocol, when tracing.
func (p *Process) trace(dir string, line []byte) {
	if p.cfg.Trace == nil {
		return
	}
	p.traceMu.Lock()
	defer p.traceMu.Unlock()
	pid := 0
	if p.cmd != nil && p.cmd.Process != nil {
		pid = p.cmd.Process.Pid
	}
	fmt.Fprintf(p.cfg.Trace, "%s %s[%d] %s %s\n", time.Now().Format("15:04:05.000000"), p.cfg.Name, pid, dir, line)
}

// ended handles the end of the driver's output: expected after Close,
// a crash otherwise.
func (p *Process) ended(how string) {
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	p.mu.Lock()
	closing, status, started := p.closing, p.exitErr, p.hello.Type != ""
	p.mu.Unlock()
	if closing && how == "" {
		return
	}
	what := "exited"
	if status != nil {
		what = fmt.Sprintf("exited (%v)", status)
	}
	if !started {
		p.breakf("%s%s before answering its hello%s", what, how, p.stderr.said())
		return
	}
	p.breakf("%s%s while lockbench still needed it%s", what, how, p.stderr.said())
}

// call sends req and waits for its answer: until the context's deadline
// (which the driver is told, as timeout_ms), then for the grace, in
// running time. A driver that has not answered by then is hung: broken.
// A cancelled context abandons the call (a late answer is ignored).
func (p *Process) call(ctx context.Context, req Request) (answer, error) {
	if err := p.Err(); err != nil {
		return answer{}, err
	}
	if err := ctx.Err(); err != nil {
		return answer{}, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.cfg.DefaultTimeout)
	}
	req.TimeoutMs = max(1, int64((time.Until(deadline)+time.Millisecond-1)/time.Millisecond))
	c := &call{done: make(chan answer, 1)}
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return answer{}, p.Err()
	}
	p.nextID++
	req.ID = p.nextID
	c.req = req
	p.pending[req.ID] = c
	p.mu.Unlock()
	line, err := json.Marshal(req)
	if err != nil {
		return answer{}, fmt.Errorf("encode %s: %w", req.Type, err)
	}
	if err := p.write(line); err != nil {
		// The driver is gone: its reader will say how, soon.
		select {
		case <-p.broken:
		case <-time.After(2 * time.Second):
			p.breakf("could not write %s %d to its stdin: %v", req.Type, req.ID, err)
		}
		return answer{}, p.Err()
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case a := <-c.done:
		return a, nil
	case <-p.broken:
		return answer{}, p.Err()
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			p.abandon(req)
			return answer{}, ctx.Err()
		}
	case <-timer.C:
	}
	if a, ok := p.graceWait(c); ok {
		return a, nil
	}
	if err := p.Err(); err != nil {
		return answer{}, err
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	what := fmt.Sprintf("%s %d (client %d", req.Type, req.ID, req.Client)
	if req.Key != "" {
		what += ", key " + req.Key
	}
	p.breakf("did not answer %s) within its timeout of %s and %s of grace", what, timeout, p.cfg.Grace)
	return answer{}, p.Err()
}

// graceTick is the grain of the grace's running-time count.
const graceTick = 20 * time.Millisecond

// graceWait waits for c's answer for the grace, counted in ticks of a
// ticker: a stopped process loses the ticks it could not take (a ticker
// keeps one), so a pause of the instance does not use the grace up.
func (p *Process) graceWait(c *call) (answer, bool) {
	t := time.NewTicker(graceTick)
	defer t.Stop()
	for n := time.Duration(0); n < p.cfg.Grace; {
		select {
		case a := <-c.done:
			return a, true
		case <-p.broken:
			return answer{}, false
		case <-t.C:
			n += graceTick
		}
	}
	select {
	case a := <-c.done:
		return a, true
	default:
		return answer{}, false
	}
}

// abandon forgets a call whose caller gave up.
func (p *Process) abandon(req Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[req.ID]; ok {
		delete(p.pending, req.ID)
		p.abandoned[req.ID] = req.Type
	}
}

// Close shuts the driver down: its stdin closes, and it must exit within
// closeWait; otherwise it is killed. It returns an error if it had to be.
func (p *Process) Close() error {
	p.mu.Lock()
	already := p.closing
	p.closing = true
	p.mu.Unlock()
	if !already {
		p.writeMu.Lock()
		for p.writing {
			p.writeIdle.Wait()
		}
		p.stdin.Close()
		p.writeMu.Unlock()
	}
	var err error
	select {
	case <-p.exited:
	case <-time.After(closeWait):
		p.kill()
		<-p.exited
		err = fmt.Errorf("driver %s did not exit within %s of its stdin closing: killed", p.cfg.Name, closeWait)
	}
	// What it started and left behind (a setsid child) goes too.
	if left := Leftovers(p.tag); len(left) > 0 {
		p.endChildren()
		if err == nil {
			err = fmt.Errorf("driver %s left processes %v running after it exited: killed", p.cfg.Name, left)
		}
	}
	<-p.readerDone
	return err
}
