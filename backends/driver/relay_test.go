package driver

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer answers every line with itself; it closes a connection
// that sends "bye".
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if sc.Text() == "bye" {
						return
					}
					io.WriteString(c, sc.Text()+"\n")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, within time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(within))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestRelay: a relay forwards through the dialer it is given, swallows
// everything while blackholed, resets what it swallowed when healed, and
// passes the server's end of a connection on to the driver.
func TestRelay(t *testing.T) {
	addr := echoServer(t)
	var dialed atomic.Int64
	var d net.Dialer
	r, err := StartRelay("srv-1", addr, func(ctx context.Context, n, a string) (net.Conn, error) {
		dialed.Add(1)
		return d.DialContext(ctx, n, a)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "hello", time.Second); err != nil || got != "hello" {
		t.Fatalf("through the relay: %q %v", got, err)
	}
	if dialed.Load() != 1 || r.Dials() != 1 {
		t.Errorf("dialed %d times through the dialer (%d counted), want 1", dialed.Load(), r.Dials())
	}
	r.Blackhole()
	if got, err := roundTrip(c, "anyone?", 200*time.Millisecond); err == nil {
		t.Errorf("a blackholed link answered %q", got)
	}
	c2, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, "new?", 200*time.Millisecond); err == nil {
		t.Errorf("a new connection through a blackholed link answered %q", got)
	}
	r.Heal()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("a connection swallowed by the blackhole is still open after the heal: %v", err)
	}
	c3, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "back", time.Second); err != nil || got != "back" {
		t.Errorf("after the heal: %q %v", got, err)
	}
	// The server ends the connection: so does the relay, to the driver.
	io.WriteString(c3, "bye\n")
	c3.SetDeadline(time.Now().Add(time.Second))
	if _, err := c3.Read(make([]byte, 1)); err == nil {
		t.Error("the server closed, the driver's side did not")
	}
}

// TestRelayUnreachable: a server the dialer cannot reach resets the
// driver's connection at once.
func TestRelayUnreachable(t *testing.T) {
	r, err := StartRelay("gone", "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		return // reset before the dial even returned
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("read from an unreachable server's relay succeeded")
	}
}
