package resource

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// Client is one connection to the resource. Not safe for concurrent use:
// each lock client has its own.
type Client struct {
	addr string
	proc string
	conn net.Conn
	r    *bufio.Reader
}

// NewClient returns a client for proc that dials addr on first use.
func NewClient(addr, proc string) *Client { return &Client{addr: addr, proc: proc} }

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

// Read reads both registers of key, presenting token.
func (c *Client) Read(ctx context.Context, key string, token uint64) (ReadResult, error) {
	var rr ReadResult
	reply, err := c.call(ctx, fmt.Sprintf("R %s %d %s\n", key, token, c.proc))
	if err != nil {
		return rr, err
	}
	if _, err := fmt.Sscan(reply, &rr.Unfenced, &rr.Fenced); err != nil {
		return rr, fmt.Errorf("resource read reply %q: %w", reply, err)
	}
	return rr, nil
}

// Write writes value+1 to both registers of key, based on what rr read.
func (c *Client) Write(ctx context.Context, key string, rr ReadResult, token uint64) (WriteResult, error) {
	var wr WriteResult
	reply, err := c.call(ctx, fmt.Sprintf("W %s %d %d %d %s\n", key, rr.Unfenced, rr.Fenced, token, c.proc))
	if err != nil {
		return wr, err
	}
	var u string
	if _, err := fmt.Sscan(reply, &u, &wr.Fenced); err != nil {
		return wr, fmt.Errorf("resource write reply %q: %w", reply, err)
	}
	wr.Lost = u == "lost"
	return wr, nil
}

// Abandon tells the resource this client gave up its work on key without
// writing.
func (c *Client) Abandon(ctx context.Context, key string) error {
	_, err := c.call(ctx, fmt.Sprintf("A %s %s\n", key, c.proc))
	return err
}

func (c *Client) call(ctx context.Context, req string) (string, error) {
	if c.conn == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return "", fmt.Errorf("dial resource: %w", err)
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return "", c.fail(err)
	}
	if _, err := c.conn.Write([]byte(req)); err != nil {
		return "", c.fail(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", c.fail(err)
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "ERR ") {
		return "", fmt.Errorf("resource: %s", line[4:])
	}
	return line, nil
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
