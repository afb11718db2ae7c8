package cluster

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Toxi is an in-process toxiproxy server on loopback, driven only through
// toxiproxy's own client API, so that the same code could drive an external
// toxiproxy instead.
type Toxi struct {
	server *toxiproxy.ApiServer
	Client *toxiclient.Client
	Addr   string
	host   string
	errc   chan error
	// prefix names this run's proxies on an external server.
	prefix string
}

// StartToxi starts the toxiproxy API server on a free port of host; its
// proxies listen on host too.
func StartToxi(host string) (*Toxi, error) {
	port, err := FreePort(host)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	t := &Toxi{server: srv, Addr: addr, host: host, errc: make(chan error, 1)}
	go func() { t.errc <- srv.Listen(addr) }()
	t.Client = toxiclient.NewClient(addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := t.Client.Version(); err == nil {
			return t, nil
		}
		select {
		case err := <-t.errc:
			return nil, fmt.Errorf("toxiproxy on %s: %w", addr, err)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("toxiproxy on %s did not answer within 5s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ExternalToxi is a toxiproxy server lockbench did not start.
type ExternalToxi struct {
	API        string // its API URL
	ListenHost string // the host its proxies listen on
}

// ConnectToxi drives an existing toxiproxy. Proxies get names starting
// with prefix, so that runs sharing the server never touch each other's,
// and Close deletes only those.
func ConnectToxi(e ExternalToxi, prefix string) (*Toxi, error) {
	c := toxiclient.NewClient(e.API)
	if _, err := c.Version(); err != nil {
		return nil, fmt.Errorf("toxiproxy at %s (targets file): %w", e.API, err)
	}
	return &Toxi{Client: c, Addr: e.API, host: e.ListenHost, prefix: prefix}, nil
}

// Proxy creates a proxy named name from a fresh loopback port to upstream and
// returns it; proxy.Listen is the address clients should dial.
func (t *Toxi) Proxy(name, upstream string) (*toxiclient.Proxy, error) {
	p, err := t.Client.CreateProxy(t.prefix+name, net.JoinHostPort(t.host, "0"), upstream)
	if err != nil {
		return nil, fmt.Errorf("create proxy %s -> %s: %w", name, upstream, err)
	}
	return p, nil
}

// Close deletes every proxy and stops the server.
func (t *Toxi) Close() error {
	var errs []error
	if proxies, err := t.Client.Proxies(); err == nil {
		for name, p := range proxies {
			if !strings.HasPrefix(name, t.prefix) {
				continue // another run's, on an external server
			}
			if err := p.Delete(); err != nil {
				errs = append(errs, fmt.Errorf("delete proxy %s: %w", name, err))
			}
		}
	}
	if t.server == nil {
		return errors.Join(errs...) // an external server stays up
	}
	if err := t.server.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("stop toxiproxy: %w", err))
	}
	// The proxies' listeners belong to the server's collection; Clear
	// closes any that Delete missed.
	if err := t.server.Collection.Clear(); err != nil {
		errs = append(errs, fmt.Errorf("clear proxies: %w", err))
	}
	return errors.Join(errs...)
}

// FreePort returns a TCP port that was free on host a moment ago.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
