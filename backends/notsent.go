package backends

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
)

// sendCounter counts the bytes an instance's connections have written,
// so that a failed operation can be told surely never sent (ErrNotSent):
// no connection of the instance wrote a byte while it ran (its dials were
// refused or timed out, its pool had no connection to give). It is for
// client libraries that write a request in the caller's own call and
// never after it returns (go-redis, retries included); a library that
// queues requests and writes them later cannot use it. A write of another
// client, or of the library's own, only ever takes the claim away: it
// never makes one.
type sendCounter struct{ n atomic.Int64 }

// sentCounter is the instance's counter (Env.Shared), made on first use.
// Call it before any other Shared.Get, never inside one.
func sentCounter(env Env) *sendCounter {
	if env.Shared == nil {
		return &sendCounter{}
	}
	v, err := env.Shared.Get("sent-bytes", func() (any, func() error, error) { return &sendCounter{}, nil, nil })
	if err != nil {
		return &sendCounter{}
	}
	return v.(*sendCounter)
}

// dial wraps d so that every connection it makes counts what it writes.
func (s *sendCounter) dial(d func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, s: s}, nil
	}
}

// mark is the count now, taken before an operation.
func (s *sendCounter) mark() int64 { return s.n.Load() }

// unsent returns err, wrapped with ErrNotSent when the operation begun at
// mark surely never sent its request: no connection of the instance has
// written a byte since.
func (s *sendCounter) unsent(mark int64, err error) error {
	if err == nil || s.n.Load() != mark {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotSent, err)
}

type countingConn struct {
	net.Conn
	s *sendCounter
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.s.n.Add(int64(n))
	return n, err
}
