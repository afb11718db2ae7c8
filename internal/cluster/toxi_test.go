package cluster

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// TestToxiproxyRefusesForeignRequests replays the attack of issue 41: a
// local user who finds the in-process toxiproxy API asks it to listen on
// all interfaces and relay to a loopback-only service. Without the run's
// token every request is refused and no proxy made; with it (the harness
// itself), a listener on any address but the run's is refused too.
func TestToxiproxyRefusesForeignRequests(t *testing.T) {
	toxi, err := StartToxi("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer toxi.Close()
	service, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer service.Close()

	// A stranger, with toxiproxy's own client and with plain HTTP.
	stranger := toxiclient.NewClient(toxi.Addr)
	if _, err := stranger.CreateProxy("expose", "0.0.0.0:0", service.Addr().String()); err == nil {
		t.Fatal("a foreign request made a proxy listen on all interfaces")
	}
	if _, err := stranger.Proxies(); err == nil {
		t.Error("a foreign request listed the run's proxies")
	}
	for _, ua := range []string{"", "toxiproxy-cli", "lockbench/"} {
		req, _ := http.NewRequest("POST", "http://"+toxi.Addr+"/proxies", strings.NewReader(`{"name":"x","listen":"0.0.0.0:0","upstream":"`+service.Addr().String()+`"}`))
		req.Header.Set("User-Agent", ua)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("User-Agent %q: status %d (%s), want 403", ua, resp.StatusCode, b)
		}
	}
	// The harness itself may not open a listener elsewhere either.
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0", "127.0.0.2:0", "localhost:0"} {
		if _, err := toxi.Client.CreateProxy("wide", listen, service.Addr().String()); err == nil {
			t.Errorf("a proxy listening on %s was made", listen)
		}
	}
	if p, err := toxi.Proxy("ok", service.Addr().String()); err != nil {
		t.Errorf("the run's own proxy was refused: %v", err)
	} else if host, _, _ := net.SplitHostPort(p.Listen); host != "127.0.0.1" {
		t.Errorf("the run's proxy listens on %s", p.Listen)
	}
	// Nothing the stranger asked for exists.
	ps, err := toxi.Client.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range ps {
		if name != "ok" {
			t.Errorf("proxy %s (%s) exists", name, p.Listen)
		}
	}
	// A move of the run's proxy to all interfaces is refused.
	p, err := toxi.Get("ok")
	if err != nil {
		t.Fatal(err)
	}
	p.Listen = "0.0.0.0:0"
	if err := p.Save(); err == nil {
		t.Error("the run's proxy was moved to all interfaces")
	}
}
