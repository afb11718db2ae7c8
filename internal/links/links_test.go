package links

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// echo serves one line per request, after delay, and reports the address
// each client connected from.
func echo(t *testing.T, ip string, delay time.Duration, peers chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if peers != nil {
				peers <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					time.Sleep(delay)
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, d *Dialer, addr string) {
	t.Helper()
	c, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ping" {
		t.Fatalf("answer %q, %v", line, err)
	}
}

// TestDialerRoutesAndCounts: a direct route leaves from the instance's own
// address; a route with Via reaches the proxy instead of the real address;
// both are counted under the link's name, with the answer's delay.
func TestDialerRoutesAndCounts(t *testing.T) {
	peers := make(chan string, 4)
	direct := echo(t, "127.0.0.1", 0, peers)
	slow := echo(t, "127.0.0.1", 30*time.Millisecond, nil)
	d := NewDialer("127.0.77.5", []Route{
		{Name: "redis-1", Addr: direct},
		{Name: "redis-2", Addr: "127.0.77.200:1", Via: slow}, // nothing listens on the real address
	}, 0)
	roundTrip(t, d, direct)
	if src := <-peers; src != "127.0.77.5" {
		t.Errorf("server saw the client from %s, want the instance's address 127.0.77.5", src)
	}
	roundTrip(t, d, "127.0.77.200:1")
	if _, err := d.DialContext(context.Background(), "tcp", "127.0.77.201:1"); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	s := d.Snapshot()
	r1, r2 := s["redis-1"], s["redis-2"]
	if r1.Dials != 1 || r1.BytesOut != 5 || r1.BytesIn != 5 || r1.Answers() != 1 {
		t.Errorf("redis-1 counts: %+v", r1)
	}
	if r2.Dials != 1 || r2.Answers() != 1 || r2.SlowestAtLeast() < 20*time.Millisecond {
		t.Errorf("redis-2 counts: %+v (slowest at least %s, want >= 20ms)", r2, r2.SlowestAtLeast())
	}
	if s["127.0.77.201:1"].DialErrors != 1 {
		t.Errorf("unrouted dial error not counted: %+v", s)
	}
	diff := s["redis-1"].Sub(Counts{Dials: 1})
	if diff.Dials != 0 || diff.BytesIn != 5 {
		t.Errorf("Sub: %+v", diff)
	}
	back, err := Decode(s.Encode())
	if err != nil || back["redis-2"] != r2 {
		t.Errorf("encode/decode: %v %+v", err, back["redis-2"])
	}
}

// TestRelayCountsAServerSideLink: a relay forwards to its upstream and
// counts the link like a client's dialer does.
func TestRelayCountsAServerSideLink(t *testing.T) {
	up := echo(t, "127.0.0.1", 5*time.Millisecond, nil)
	r, err := NewRelay("127.0.0.1", "redis-1-repl", up)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := NewDialer("", nil, 0)
	roundTrip(t, d, r.Addr())
	c := r.Counts()
	if c.Dials != 1 || c.BytesOut != 5 || c.BytesIn != 5 || c.Answers() != 1 || c.SlowestAtLeast() < 2*time.Millisecond {
		t.Errorf("relay counts: %+v", c)
	}
}

// TestDialerMarksItsConnections: a dialer with a mark puts it on every
// connection it makes (SO_MARK, which needs root), the mark a firewall
// rule tells an instance's packets by when its address does not show.
func TestDialerMarksItsConnections(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_MARK needs root")
	}
	addr := echo(t, "127.0.0.1", 0, nil)
	d := NewDialer("", nil, 0x4c010203)
	c, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*countedConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mark int
	var gerr error
	rc.Control(func(fd uintptr) { mark, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK) })
	if gerr != nil || mark != 0x4c010203 {
		t.Errorf("the connection's mark is %#x (%v), want 0x4c010203", mark, gerr)
	}
}

// TestRefuseLookups: a process whose addresses are all IPs refuses name
// lookups without sending a query (its hosts file still answers); the
// addresses are told apart.
func TestRefuseLookups(t *testing.T) {
	if !AllIPs("127.0.0.1:6379", "[::1]:2379", "127.0.9.1", "") || AllIPs("127.0.0.1:1", "redis.internal:6379") || AllIPs("FailoverClient") {
		t.Error("AllIPs does not tell IPs from names")
	}
	saved := net.DefaultResolver
	defer func() { net.DefaultResolver = saved }()
	RefuseLookups()
	if _, err := net.DefaultResolver.LookupIPAddr(context.Background(), "FailoverClient"); err == nil || !strings.Contains(err.Error(), "no name lookups from this process") {
		t.Errorf("a lookup of a name: %v, want it refused", err)
	}
	if ips, err := net.DefaultResolver.LookupIPAddr(context.Background(), "localhost"); err != nil || len(ips) == 0 {
		t.Errorf("localhost, from the hosts file: %v %v", ips, err)
	}
}
