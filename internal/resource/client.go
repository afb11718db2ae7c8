package resource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/internal/monoclock"
)

// Dial connects to the resource; workers pass their routed dialer.
type Dial func(ctx context.Context, network, addr string) (net.Conn, error)

// Mux is one instance's connection to the resource, shared by all its
// clients: requests from many clients are written together and the server
// answers them in order, so a busy instance pays a few system calls for
// many critical sections, and thousands of clients need only as many
// connections as instances. It redials after an error.
//
// At most one batch is on the wire at a time (group commit): a request
// made while a batch awaits its replies waits for them and goes out with
// every other request made meanwhile. An idle Mux writes a request at
// once; a busy one writes once per round trip, however many clients it
// serves — one system call each way for many requests instead of one
// each, which is what the resource cost on two saturated cores (make perf).
type Mux struct {
	addr string
	dial Dial

	mu      sync.Mutex
	conn    net.Conn
	gen     int // connection generation: waiters of a dead one get its error
	out     []byte
	waiters []*waiter // in the order their requests were queued
	writing bool      // a writer goroutine is sending the queue
	queued  int       // waiters at the end of waiters not yet written
	onWire  int       // waiters written whose replies have not all come
}

type waiter struct {
	n       int // replies expected
	replies []string
	done    chan error
	gen     int
}

// NewMux returns a Mux that dials addr on first use (with dial, or a plain
// dialer when nil).
func NewMux(addr string, dial Dial) *Mux {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &Mux{addr: addr, dial: dial}
}

// Client returns the resource as client proc sees it.
func (m *Mux) Client(proc string) *Client { return &Client{m: m, proc: proc} }

// call queues req (n lines) and waits for its n replies.
func (m *Mux) call(ctx context.Context, req []byte, n int) ([]string, error) {
	w := &waiter{n: n, done: make(chan error, 1)}
	m.mu.Lock()
	if m.conn == nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := m.dial(dctx, "tcp", m.addr)
		cancel()
		if err != nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("dial resource: %w", err)
		}
		m.conn = conn
		m.gen++
		go m.read(conn, m.gen)
	}
	w.gen = m.gen
	m.out = append(m.out, req...)
	m.waiters = append(m.waiters, w)
	m.queued++
	m.kick()
	m.mu.Unlock()
	select {
	case err := <-w.done:
		if err != nil {
			return nil, err
		}
		return w.replies, nil
	case <-ctx.Done():
		// The replies will still come and be dropped: the server answers
		// every request, in order.
		return nil, fmt.Errorf("resource: %w", ctx.Err())
	}
}

// kick starts a writer for the queue when nothing is on the wire and none
// is running. Called with mu held.
func (m *Mux) kick() {
	if m.writing || m.onWire > 0 || m.queued == 0 || m.conn == nil {
		return
	}
	m.writing = true
	go m.write(m.conn, m.gen)
}

// write sends the queue as one batch; the reader kicks the next writer
// when the batch's last reply has come.
func (m *Mux) write(conn net.Conn, gen int) {
	m.mu.Lock()
	if m.gen != gen || m.queued == 0 {
		m.writing = false
		m.mu.Unlock()
		return
	}
	buf := m.out
	m.out = nil
	m.onWire, m.queued = m.onWire+m.queued, 0
	m.mu.Unlock()
	_, err := conn.Write(buf)
	if err != nil {
		m.mu.Lock()
		m.writing = false
		m.mu.Unlock()
		m.fail(conn, gen, err)
		return
	}
	m.mu.Lock()
	m.writing = false
	// The replies may all have come while the write returned: the
	// reader's kick saw this writer still running, so kick here.
	if m.gen == gen {
		m.kick()
	}
	m.mu.Unlock()
}

// read hands each reply line to the oldest waiter.
func (m *Mux) read(conn net.Conn, gen int) {
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.fail(conn, gen, err)
			return
		}
		m.mu.Lock()
		if len(m.waiters) == 0 {
			m.mu.Unlock()
			m.fail(conn, gen, errors.New("a reply nobody asked for"))
			return
		}
		w := m.waiters[0]
		if m.onWire == 0 {
			m.mu.Unlock()
			m.fail(conn, gen, errors.New("a reply to a request not yet sent"))
			return
		}
		w.replies = append(w.replies, strings.TrimSpace(line))
		if len(w.replies) == w.n {
			m.waiters = m.waiters[1:]
			m.onWire--
			m.kick()
			var err error
			for _, rep := range w.replies {
				if e, ok := strings.CutPrefix(rep, "ERR "); ok {
					err = fmt.Errorf("resource: %s", e)
				}
			}
			w.done <- err
		}
		m.mu.Unlock()
	}
}

// fail drops a broken connection: its waiters get the error, the next call
// redials.
func (m *Mux) fail(conn net.Conn, gen int, err error) {
	conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return
	}
	for _, w := range m.waiters {
		w.done <- fmt.Errorf("resource: %w", err)
	}
	m.waiters, m.out, m.conn = nil, nil, nil
	m.queued, m.onWire = 0, 0
}

// Close closes the connection.
func (m *Mux) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return nil
	}
	err := m.conn.Close()
	m.conn = nil
	m.gen++
	for _, w := range m.waiters {
		w.done <- errors.New("resource: connection closed")
	}
	m.waiters, m.out, m.queued, m.onWire = nil, nil, 0, 0
	return err
}

// Client is the resource as one lock client uses it. Not safe for
// concurrent use: each lock client has its own.
type Client struct {
	m    *Mux
	proc string
	buf  []byte
}

// NewClient returns a client for proc on a connection of its own.
func NewClient(addr, proc string, dial Dial) *Client { return NewMux(addr, dial).Client(proc) }

// ReadResult is the reply to a read.
type ReadResult struct {
	Unfenced int64
	Fenced   int64 // -1: the fenced register rejected the token
}

// WriteResult is the reply to a write.
type WriteResult struct {
	Lost   bool   // the unfenced write was a lost update
	Fenced string // accepted, rejected or stale
}

// deadline is the request's deadline on the shared monotonic clock.
func deadline(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return monoclock.Now() + int64(time.Hour)
	}
	return monoclock.Now() + int64(time.Until(d))
}

func (c *Client) request(op byte, key string, token uint64, dl int64) {
	c.buf = append(c.buf, op, ' ')
	c.buf = append(c.buf, key...)
	c.buf = append(c.buf, ' ')
	c.buf = strconv.AppendUint(c.buf, token, 10)
	c.buf = append(c.buf, ' ')
	c.buf = append(c.buf, c.proc...)
	c.buf = append(c.buf, ' ')
	c.buf = strconv.AppendInt(c.buf, dl, 10)
	c.buf = append(c.buf, '\n')
}

// Read reads both registers of key, presenting token.
func (c *Client) Read(ctx context.Context, key string, token uint64) (ReadResult, error) {
	var rr ReadResult
	c.buf = c.buf[:0]
	c.request('R', key, token, deadline(ctx))
	replies, err := c.m.call(ctx, c.buf, 1)
	if err != nil {
		return rr, err
	}
	return rr, parseRead(replies[0], &rr)
}

// Write writes value+1 to both registers of key, based on what this
// client last read.
func (c *Client) Write(ctx context.Context, key string, token uint64) (WriteResult, error) {
	var wr WriteResult
	c.buf = c.buf[:0]
	c.request('W', key, token, deadline(ctx))
	replies, err := c.m.call(ctx, c.buf, 1)
	if err != nil {
		return wr, err
	}
	return wr, parseWrite(replies[0], &wr)
}

// ReadWrite reads and writes key in one round trip: the critical section
// of a client whose work takes no time.
func (c *Client) ReadWrite(ctx context.Context, key string, token uint64) (ReadResult, WriteResult, error) {
	var rr ReadResult
	var wr WriteResult
	dl := deadline(ctx)
	c.buf = c.buf[:0]
	c.request('R', key, token, dl)
	c.request('W', key, token, dl)
	replies, err := c.m.call(ctx, c.buf, 2)
	if err != nil {
		return rr, wr, err
	}
	if err := parseRead(replies[0], &rr); err != nil {
		return rr, wr, err
	}
	return rr, wr, parseWrite(replies[1], &wr)
}

func parseRead(reply string, rr *ReadResult) error {
	u, f, ok := strings.Cut(reply, " ")
	var err1, err2 error
	rr.Unfenced, err1 = strconv.ParseInt(u, 10, 64)
	rr.Fenced, err2 = strconv.ParseInt(f, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("resource read reply %q", reply)
	}
	return nil
}

func parseWrite(reply string, wr *WriteResult) error {
	u, f, ok := strings.Cut(reply, " ")
	if !ok || (u != "ok" && u != "lost") || f == "" {
		return fmt.Errorf("resource write reply %q", reply)
	}
	wr.Lost, wr.Fenced = u == "lost", f
	return nil
}

// Abandon tells the resource this client gave up its work on key without
// writing.
func (c *Client) Abandon(ctx context.Context, key string) error {
	_, err := c.m.call(ctx, []byte("A "+key+" "+c.proc+"\n"), 1)
	return err
}

// Close closes the client's connection (the instance's Mux closes the
// shared one).
func (c *Client) Close() error { return nil }
