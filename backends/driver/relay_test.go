package driver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

// closed waits up to a minute for c to be closed by its other end, and
// says how it was not: a read that timed out is a connection still open,
// however quiet (a slow machine takes far less to pass a close on).
func closed(c net.Conn) error {
	c.SetDeadline(time.Now().Add(time.Minute))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case err == nil:
		return errors.New("it answered")
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("still open a minute later (%v)", err)
	}
	return nil
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
	clock := time.Now()
	if got, err := roundTrip(c, "hello", time.Minute); err != nil || got != "hello" {
		t.Fatalf("through the relay: %q %v", got, err)
	}
	// A blackholed link must stay silent for far longer than this round
	// trip took: silence within a window a slow machine's answer could
	// outrun proves nothing.
	quiet := 200*time.Millisecond + 10*time.Since(clock)
	if dialed.Load() != 1 || r.Dials() != 1 {
		t.Errorf("dialed %d times through the dialer (%d counted), want 1", dialed.Load(), r.Dials())
	}
	r.Blackhole()
	if got, err := roundTrip(c, "anyone?", quiet); err == nil {
		t.Errorf("a blackholed link answered %q", got)
	}
	c2, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, "new?", quiet); err == nil {
		t.Errorf("a new connection through a blackholed link answered %q", got)
	}
	r.Heal()
	if err := closed(c); err != nil {
		t.Errorf("a connection swallowed by the blackhole, after the heal: %v", err)
	}
	c3, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "back", time.Minute); err != nil || got != "back" {
		t.Errorf("after the heal: %q %v", got, err)
	}
	// The server ends the connection: so does the relay, to the driver.
	io.WriteString(c3, "bye\n")
	if err := closed(c3); err != nil {
		t.Errorf("the server closed, the driver's side: %v", err)
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
	if err := closed(c); err != nil {
		t.Errorf("the relay of an unreachable server: %v", err)
	}
}
