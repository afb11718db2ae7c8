package procgroup

import (
	"net"
	"os"
	"slices"
	"testing"
)

// TestConnectionsSeesOwnSocket: a connection this process opens is among
// its connections, by the listener's address; once closed, it is gone.
func TestConnectionsSeesOwnSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := Connections(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, ln.Addr().String()) {
		t.Errorf("connections %v lack %s", got, ln.Addr())
	}
	c.Close()
	got, _ = Connections(os.Getpid())
	if slices.Contains(got, ln.Addr().String()) {
		t.Errorf("closed connection still listed: %v", got)
	}
	if _, err := Connections(1 << 30); err == nil {
		t.Error("a process that does not exist has connections")
	}
}
