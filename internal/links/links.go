// Package links routes a worker instance's connections and counts what
// crosses each of them.
//
// Clients are always given a server's real address. The instance's Dialer
// decides how to reach it: directly, from the instance's own source address
// (so that an address-level fault can cut exactly this instance from this
// server, and the server sees the peer vanish), or through a toxiproxy proxy
// when a fault of the case acts on that link. A backend whose client learns
// server addresses at run time (a Sentinel naming the new master) is routed
// the same way, because the address it learns is a real one.
//
// Every connection is counted per link: dials, dial errors, bytes each way,
// errors, and the delay between a request and the first byte of the answer,
// in coarse buckets that can be subtracted. The coordinator reads these
// counters to see whether a fault took effect: a partitioned link must stop
// answering, a slowed one must answer late, a link nobody uses is a fault
// that did nothing.
package links

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Resource is the link name of the protected resource.
const Resource = "resource"

// Route says how an instance reaches one server.
type Route struct {
	Name string `json:"name"`          // server name, or "resource"
	Addr string `json:"addr"`          // the real address clients are given
	Via  string `json:"via,omitempty"` // the proxy to dial instead, when a fault needs one
}

// Edges are the upper bounds of the response-delay buckets; the last bucket
// is everything slower.
var Edges = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
}

// NBuckets is the number of response-delay buckets.
const NBuckets = 13

// Counts are the cumulative counters of one link. They only grow, so the
// difference of two snapshots is what happened between them.
type Counts struct {
	Dials      int64 `json:"dials"`
	DialErrors int64 `json:"dial_errors"`
	BytesOut   int64 `json:"out"`
	BytesIn    int64 `json:"in"`
	// Errors are reads and writes that failed with something other than a
	// clean end of stream (a reset, a timeout).
	Errors int64 `json:"errors"`
	// Closed counts connections the other end closed (a read met the end
	// of the stream): a cut that resets the connections in use shows here.
	Closed int64 `json:"closed,omitempty"`
	// Responses counts answers by delay: bucket i holds delays below
	// Edges[i], the last one everything slower.
	Responses [NBuckets]int64 `json:"responses"`
}

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts {
	d := Counts{Dials: c.Dials - o.Dials, DialErrors: c.DialErrors - o.DialErrors, BytesOut: c.BytesOut - o.BytesOut,
		BytesIn: c.BytesIn - o.BytesIn, Errors: c.Errors - o.Errors, Closed: c.Closed - o.Closed}
	for i := range d.Responses {
		d.Responses[i] = c.Responses[i] - o.Responses[i]
	}
	return d
}

// Add returns c + o.
func (c Counts) Add(o Counts) Counts {
	d := Counts{Dials: c.Dials + o.Dials, DialErrors: c.DialErrors + o.DialErrors, BytesOut: c.BytesOut + o.BytesOut,
		BytesIn: c.BytesIn + o.BytesIn, Errors: c.Errors + o.Errors, Closed: c.Closed + o.Closed}
	for i := range d.Responses {
		d.Responses[i] = c.Responses[i] + o.Responses[i]
	}
	return d
}

// Attempts is how often the link was used: dials (refused ones too), bytes
// sent, and connections that failed or were closed under their user.
func (c Counts) Attempts() int64 { return c.Dials + c.DialErrors + c.BytesOut + c.Errors + c.Closed }

// Answers is how many answers came back.
func (c Counts) Answers() int64 {
	var n int64
	for _, r := range c.Responses {
		n += r
	}
	return n
}

// SlowestAtLeast returns a lower bound of the slowest answer: the lower
// edge of the highest non-empty bucket (0 when there was none).
func (c Counts) SlowestAtLeast() time.Duration {
	for i := NBuckets - 1; i > 0; i-- {
		if c.Responses[i] > 0 {
			return Edges[i-1]
		}
	}
	return 0
}

// Snapshot maps link names to their counters.
type Snapshot map[string]Counts

type counters struct {
	dials, dialErrs, out, in, errs, closed atomic.Int64
	resp                                   [NBuckets]atomic.Int64
}

func (c *counters) counts() Counts {
	out := Counts{Dials: c.dials.Load(), DialErrors: c.dialErrs.Load(), BytesOut: c.out.Load(), BytesIn: c.in.Load(), Errors: c.errs.Load(), Closed: c.closed.Load()}
	for i := range out.Responses {
		out.Responses[i] = c.resp[i].Load()
	}
	return out
}

func (c *counters) answered(d time.Duration) {
	for i, e := range Edges {
		if d < e {
			c.resp[i].Add(1)
			return
		}
	}
	c.resp[NBuckets-1].Add(1)
}

// Dialer dials an instance's connections. It is safe for concurrent use.
type Dialer struct {
	src    net.Addr
	mark   int
	routes map[string]Route // by real address
	mu     sync.Mutex
	stats  map[string]*counters // by link name
}

// NewDialer returns a dialer whose connections leave from source (an IP,
// or "" for the kernel's choice), carry mark (SO_MARK; 0: none) and follow
// routes.
func NewDialer(source string, routes []Route, mark int) *Dialer {
	d := &Dialer{routes: map[string]Route{}, stats: map[string]*counters{}, mark: mark}
	if ip := net.ParseIP(source); ip != nil {
		d.src = &net.TCPAddr{IP: ip}
	}
	for _, r := range routes {
		d.routes[r.Addr] = r
		d.stats[r.Name] = &counters{}
	}
	return d
}

// Route returns the route of a real address.
func (d *Dialer) Route(addr string) (Route, bool) {
	r, ok := d.routes[addr]
	return r, ok
}

// DialContext dials addr (a real server address) the way its route says,
// counting the connection under the route's name. An address without a
// route is dialled directly and counted under the address itself.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	r, ok := d.routes[addr]
	name, target := addr, addr
	if ok {
		name = r.Name
		if r.Via != "" {
			target = r.Via
		}
	}
	c := d.counter(name)
	nd := net.Dialer{LocalAddr: d.src}
	if d.mark != 0 {
		nd.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, d.mark)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("mark the connection %#x (SO_MARK): %w", d.mark, serr)
			}
			return nil
		}
	}
	// A loopback source reaches loopback only: a server on another host
	// (a targets file's) is dialled from the address the kernel picks.
	if src, ok := d.src.(*net.TCPAddr); ok && src.IP.IsLoopback() {
		if host, _, err := net.SplitHostPort(target); err == nil {
			if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() {
				nd.LocalAddr = nil
			}
		}
	}
	conn, err := nd.DialContext(ctx, network, target)
	if err != nil {
		c.dialErrs.Add(1)
		return nil, err
	}
	c.dials.Add(1)
	return &countedConn{Conn: conn, c: c}, nil
}

func (d *Dialer) counter(name string) *counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.stats[name]
	if c == nil {
		c = &counters{}
		d.stats[name] = c
	}
	return c
}

// Snapshot returns the counters of every link so far.
func (d *Dialer) Snapshot() Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(Snapshot, len(d.stats))
	for name, c := range d.stats {
		out[name] = c.counts()
	}
	return out
}

// countedConn counts what crosses one connection. pending holds the time of the
// first write not yet answered (0: none), so the delay to the first byte
// read after it is the answer's delay, whatever the protocol.
type countedConn struct {
	net.Conn
	c       *counters
	pending atomic.Int64
}

var base = time.Now()

func now() int64 { return int64(time.Since(base)) + 1 }

func (c *countedConn) Write(b []byte) (int, error) {
	if len(b) > 0 {
		c.pending.CompareAndSwap(0, now())
	}
	n, err := c.Conn.Write(b)
	c.c.out.Add(int64(n))
	if err != nil {
		c.c.errs.Add(1)
	}
	return n, err
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.c.in.Add(int64(n))
		if p := c.pending.Swap(0); p != 0 {
			c.c.answered(time.Duration(now() - p))
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		c.c.closed.Add(1)
	case err != nil && !errors.Is(err, net.ErrClosed):
		c.c.errs.Add(1)
	}
	return n, err
}

// Encode writes a snapshot as JSON.
func (s Snapshot) Encode() json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		return nil // a map of numbers always encodes
	}
	return b
}

// Decode reads a snapshot written by Encode.
func Decode(b []byte) (Snapshot, error) {
	var s Snapshot
	err := json.Unmarshal(b, &s)
	return s, err
}
