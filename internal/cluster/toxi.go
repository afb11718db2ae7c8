package cluster

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Toxi is an in-process toxiproxy server on loopback, driven only through
// toxiproxy's own client API, so that the same code could drive an external
// toxiproxy instead.
type Toxi struct {
	server *toxiproxy.ApiServer
	http   *http.Server
	Client *toxiclient.Client
	Addr   string
	host   string
	errc   chan error
	// prefix names this run's proxies on an external server.
	prefix string
}

// StartToxi starts the toxiproxy API server on a free port of host (the
// run's harness address, on loopback or the run's bridge); its proxies
// listen on host too. The API answers only this process: every request
// must carry the run's random token (as its User-Agent, the one header
// toxiproxy's client lets a caller set), so another local user can
// neither read nor reconfigure it; and a proxy may only listen on host,
// so no request, even the harness's own, opens a listener on another
// address (all interfaces, the machine's external address).
func StartToxi(host string) (*Toxi, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("toxiproxy API on %s: %w", host, err)
	}
	addr := ln.Addr().String()
	var tb [16]byte
	if _, err := rand.Read(tb[:]); err != nil {
		ln.Close()
		return nil, fmt.Errorf("toxiproxy API token: %w", err)
	}
	token := "lockbench/" + hex.EncodeToString(tb[:])
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	hs := &http.Server{Handler: toxiGuard(srv.Routes(), token, host), ReadHeaderTimeout: 15 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	t := &Toxi{server: srv, http: hs, Addr: addr, host: host, errc: make(chan error, 1)}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.errc <- err
		}
	}()
	t.Client = toxiclient.NewClient(addr)
	t.Client.UserAgent = token
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
			hs.Close()
			return nil, fmt.Errorf("toxiproxy on %s did not answer within 5s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// toxiGuard lets through only requests that carry token, and only proxies
// that listen on host. A refused request gets 403 and does nothing.
func toxiGuard(next http.Handler, token, host string) http.Handler {
	want := net.ParseIP(host)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("User-Agent")), []byte(token)) != 1 {
			http.Error(w, "lockbench's toxiproxy answers only the run that started it", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/populate" {
			http.Error(w, "populate is not allowed", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
			if err != nil || len(body) > 1<<20 {
				http.Error(w, "request body unreadable or over 1 MiB", http.StatusRequestEntityTooLarge)
				return
			}
			var p struct {
				Listen *string `json:"listen"`
			}
			if strings.HasPrefix(r.URL.Path, "/proxies") && !strings.Contains(r.URL.Path, "/toxics") && json.Unmarshal(body, &p) == nil && p.Listen != nil {
				h, _, err := net.SplitHostPort(*p.Listen)
				if ip := net.ParseIP(h); err != nil || ip == nil || !ip.Equal(want) {
					http.Error(w, fmt.Sprintf("a proxy may listen on %s only, not %q", host, *p.Listen), http.StatusForbidden)
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
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

// Get returns the proxy named name (as Proxy named it).
func (t *Toxi) Get(name string) (*toxiclient.Proxy, error) {
	return t.Client.Proxy(t.prefix + name)
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
	if err := t.http.Close(); err != nil {
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

// routed makes the server-side link name go through a proxy when a fault
// acts on it, and returns the address to advertise for it: a relay that
// counts the link's traffic in front of the proxy, or addr itself.
func (c *Cluster) routed(name, addr string) (string, error) {
	if !c.proxied[name] {
		return addr, nil
	}
	p, err := c.proxy(name, addr)
	if err != nil {
		return "", err
	}
	r, err := links.NewRelay(c.Slot.Harness(), name, p.Listen)
	if err != nil {
		return "", fmt.Errorf("relay for %s: %w", name, err)
	}
	c.mu.Lock()
	c.relays[name] = r
	c.mu.Unlock()
	return r.Addr(), nil
}

// RelayCounts returns the traffic of a server-side link, if it has a relay.
func (c *Cluster) RelayCounts(name string) (links.Counts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.relays[name]
	if !ok {
		return links.Counts{}, false
	}
	return r.Counts(), true
}

// ClientProxy returns the shared proxy of a server's client link, making it
// on first use.
func (c *Cluster) ClientProxy(name string) (*toxiclient.Proxy, error) {
	s := c.Server(name)
	if s == nil {
		return nil, fmt.Errorf("proxy for %s: no such server", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Proxy == nil {
		p, err := c.proxy(name, s.Addr)
		if err != nil {
			return nil, err
		}
		s.Proxy = p
	}
	return s.Proxy, nil
}

// proxy puts a toxiproxy proxy named name in front of addr.
func (c *Cluster) proxy(name, addr string) (*toxiclient.Proxy, error) {
	return c.Toxi.Proxy(name, addr)
}
