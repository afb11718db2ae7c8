package links

import (
	"context"
	"io"
	"net"
	"sync"
)

// Relay counts the traffic of a server-side link (an etcd member's peer
// link, a Sentinel replica's replication link): the servers are given its
// address, and it forwards every connection to upstream (the toxiproxy
// proxy of the link) through a Dialer, which counts what crosses it as it
// does for a worker's clients. A fault on such a link is then observed the
// same way as one on a client link.
type Relay struct {
	name string
	ln   net.Listener
	d    *Dialer
	up   string
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

// NewRelay listens on a free port of host and forwards to upstream,
// counting under name.
func NewRelay(host, name, upstream string) (*Relay, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	r := &Relay{name: name, ln: ln, up: upstream, open: map[net.Conn]struct{}{},
		d: NewDialer("", []Route{{Name: name, Addr: upstream}}, 0)}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address to give the servers.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Counts returns what crossed the link so far.
func (r *Relay) Counts() Counts { return r.d.Snapshot()[r.name] }

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.serve(c)
	}
}

func (r *Relay) track(c net.Conn, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.open[c] = struct{}{}
	} else {
		delete(r.open, c)
	}
}

func (r *Relay) serve(down net.Conn) {
	defer r.wg.Done()
	defer down.Close()
	up, err := r.d.DialContext(context.Background(), "tcp", r.up)
	if err != nil {
		return // counted as a dial error; the server sees its connection close
	}
	defer up.Close()
	r.track(down, true)
	r.track(up, true)
	defer r.track(down, false)
	defer r.track(up, false)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, down); closeWrite(up); done <- struct{}{} }()
	go func() { io.Copy(down, up); closeWrite(down); done <- struct{}{} }()
	<-done
	<-done
}

// Close stops the relay and closes its connections.
func (r *Relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.open {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// closeWrite half-closes c when it can, so the other side sees the end.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
