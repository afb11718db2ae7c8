package resource

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/monoclock"
)

// Dial connects to the resource; workers pass their routed dialer.
type Dial func(ctx context.Context, network, addr string) (net.Conn, error)

// Client is one connection to the resource. Not safe for concurrent use:
// each lock client has its own.
type Client struct {
	addr string
	proc string
	dial Dial
	conn net.Conn
	r    *bufio.Reader
}

// NewClient returns a client for proc that dials addr on first use (with
// dial, or a plain dialer when nil).
func NewClient(addr, proc string, dial Dial) *Client {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &Client{addr: addr, proc: proc, dial: dial}
}

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

// Read reads both registers of key, presenting token.
func (c *Client) Read(ctx context.Context, key string, token uint64) (ReadResult, error) {
	var rr ReadResult
	replies, err := c.call(ctx, fmt.Sprintf("R %s %d %s %d\n", key, token, c.proc, deadline(ctx)), 1)
	if err != nil {
		return rr, err
	}
	return rr, parseRead(replies[0], &rr)
}

// Write writes value+1 to both registers of key, based on what this
// client last read.
func (c *Client) Write(ctx context.Context, key string, token uint64) (WriteResult, error) {
	var wr WriteResult
	replies, err := c.call(ctx, fmt.Sprintf("W %s %d %s %d\n", key, token, c.proc, deadline(ctx)), 1)
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
	replies, err := c.call(ctx, fmt.Sprintf("R %s %d %s %d\nW %s %d %s %d\n", key, token, c.proc, dl, key, token, c.proc, dl), 2)
	if err != nil {
		return rr, wr, err
	}
	if err := parseRead(replies[0], &rr); err != nil {
		return rr, wr, err
	}
	return rr, wr, parseWrite(replies[1], &wr)
}

func parseRead(reply string, rr *ReadResult) error {
	if _, err := fmt.Sscan(reply, &rr.Unfenced, &rr.Fenced); err != nil {
		return fmt.Errorf("resource read reply %q: %w", reply, err)
	}
	return nil
}

func parseWrite(reply string, wr *WriteResult) error {
	var u string
	if _, err := fmt.Sscan(reply, &u, &wr.Fenced); err != nil {
		return fmt.Errorf("resource write reply %q: %w", reply, err)
	}
	wr.Lost = u == "lost"
	return nil
}

// Abandon tells the resource this client gave up its work on key without
// writing.
func (c *Client) Abandon(ctx context.Context, key string) error {
	_, err := c.call(ctx, fmt.Sprintf("A %s %s\n", key, c.proc), 1)
	return err
}

// call sends req (one or more lines) and reads n reply lines.
func (c *Client) call(ctx context.Context, req string, n int) ([]string, error) {
	if c.conn == nil {
		conn, err := c.dial(ctx, "tcp", c.addr)
		if err != nil {
			return nil, fmt.Errorf("dial resource: %w", err)
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, c.fail(err)
	}
	if _, err := c.conn.Write([]byte(req)); err != nil {
		return nil, c.fail(err)
	}
	out := make([]string, 0, n)
	for len(out) < n {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return nil, c.fail(err)
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "ERR ") {
			return nil, fmt.Errorf("resource: %s", line[4:])
		}
		out = append(out, line)
	}
	return out, nil
}

// fail drops the connection after an error so the next call redials.
func (c *Client) fail(err error) error {
	c.conn.Close()
	c.conn, c.r = nil, nil
	return fmt.Errorf("resource: %w", err)
}

// Close closes the connection.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}
