package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Relay is a loopback listener for one server: a driver connects to it,
// and it reaches the server through the instance's dialer (backends.Env
// Dial), so every connection of the driver is routed and counted as a Go
// client's is, and every link fault acts on it. What happens to the
// server side of a connection happens to the driver's side: an end is an
// end, a reset is a reset.
//
// A relay can also be faulted itself (Blackhole, Heal): the conformance
// check cuts a driver off with it, with no root and no firewall.
type Relay struct {
	Name, Real string
	ln         net.Listener
	dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	blackhole  atomic.Bool
	dials      atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartRelay listens on a free loopback port for the server named name at
// real, reached through dial.
func StartRelay(name, real string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("relay for %s: %w", name, err)
	}
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	r := &Relay{Name: name, Real: real, ln: ln, dial: dial, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address the driver connects to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Dials counts the connections the relay made to its server.
func (r *Relay) Dials() int64 { return r.dials.Load() }

// Blackhole makes the link swallow everything from now on, both ways:
// connections stay open and requests are never answered, as a network
// partition does. New connections are accepted and swallowed too.
func (r *Relay) Blackhole() { r.blackhole.Store(true) }

// Heal ends a blackhole: every connection it swallowed is reset (what was
// swallowed is gone, so the stream cannot go on), and new ones flow again.
func (r *Relay) Heal() {
	r.mu.Lock()
	r.blackhole.Store(false)
	for c := range r.conns {
		reset(c)
	}
	r.mu.Unlock()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go r.serve(c)
	}
}

func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

func (r *Relay) serve(down net.Conn) {
	defer r.wg.Done()
	defer down.Close()
	defer r.untrack(down)
	if r.blackhole.Load() {
		io.Copy(io.Discard, down) // until Heal resets it
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	up, err := r.dial(ctx, "tcp", r.Real)
	cancel()
	if err != nil {
		reset(down) // the server could not be reached: so the driver sees
		return
	}
	r.dials.Add(1)
	if !r.track(up) {
		up.Close()
		return
	}
	defer r.untrack(up)
	defer up.Close()
	done := make(chan error, 2)
	go func() { done <- r.pump(up, down) }()
	go func() { done <- r.pump(down, up) }()
	err = <-done
	// One way ended: so does the other, as it did (a reset stays a reset).
	if err != nil && !errors.Is(err, io.EOF) {
		reset(down)
		reset(up)
	} else {
		down.Close()
		up.Close()
	}
	<-done
}

// pump copies src to dst until src ends, swallowing while blackholed.
func (r *Relay) pump(dst, src net.Conn) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.blackhole.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// reset closes c with a TCP reset when it can (SO_LINGER 0).
func reset(c net.Conn) {
	if tc, ok := c.(interface{ SetLinger(int) error }); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// Close stops the relay and ends its connections.
func (r *Relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// Relays are an instance's relays, one per server.
type Relays struct {
	list []*Relay
}

// StartRelays starts a relay for every server of endpoints (name to real
// address), reached through dial.
func StartRelays(endpoints map[string]string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Relays, error) {
	names := make([]string, 0, len(endpoints))
	for n := range endpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	rs := &Relays{}
	for _, n := range names {
		r, err := StartRelay(n, endpoints[n], dial)
		if err != nil {
			rs.Close()
			return nil, err
		}
		rs.list = append(rs.list, r)
	}
	return rs, nil
}

// Get returns the relay of a server, or nil.
func (rs *Relays) Get(name string) *Relay {
	for _, r := range rs.list {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// All returns the relays, by server name.
func (rs *Relays) All() []*Relay { return rs.list }

// Close stops every relay.
func (rs *Relays) Close() error {
	var errs []error
	for _, r := range rs.list {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
