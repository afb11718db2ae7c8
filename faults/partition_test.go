package faults_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/cluster"
)

func needFirewall(t *testing.T) {
	t.Helper()
	if err := cluster.FirewallAvailable(); err != nil {
		t.Skipf("iptables partitions unavailable here: %v", err)
	}
}

// bound dials from one loopback address to another, as servers that bind
// their source do.
func bound(from, to string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", to)
	if err != nil {
		return err
	}
	return c.Close()
}

func listen(t *testing.T, ip string) string {
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
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func firewallEnv(t *testing.T) *testEnv {
	fw := cluster.NewFirewall()
	t.Cleanup(func() { fw.Close() })
	return &testEnv{fw: fw,
		servers: map[string]string{"a": "127.0.0.61", "b": "127.0.0.62", "c": "127.0.0.63"},
		peers:   map[string][]string{"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b"}}}
}

func TestIsolateCutsBothWays(t *testing.T) {
	needFirewall(t)
	env := firewallEnv(t)
	addrB, addrA, addrC := listen(t, "127.0.0.62"), listen(t, "127.0.0.61"), listen(t, "127.0.0.63")
	heal, err := build(t, "isolate", "").Start(context.Background(), env, "a")
	if err != nil {
		t.Fatal(err)
	}
	if bound("127.0.0.61", addrB, 300*time.Millisecond) == nil || bound("127.0.0.62", addrA, 300*time.Millisecond) == nil {
		t.Error("a and b still reach each other while a is isolated")
	}
	if err := bound("127.0.0.62", addrC, time.Second); err != nil {
		t.Errorf("b and c must still talk: %v", err)
	}
	if err := heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := bound("127.0.0.61", addrB, time.Second); err != nil {
		t.Errorf("after heal: %v", err)
	}
}

func TestSplitAndOneWay(t *testing.T) {
	needFirewall(t)
	env := firewallEnv(t)
	addrC := listen(t, "127.0.0.63")
	addrB := listen(t, "127.0.0.62")
	heal, err := build(t, "split", "group: [b]").Start(context.Background(), env, "a")
	if err != nil {
		t.Fatal(err)
	}
	if bound("127.0.0.62", addrC, 300*time.Millisecond) == nil {
		t.Error("b reaches c across the split")
	}
	if err := bound("127.0.0.61", addrB, time.Second); err != nil {
		t.Errorf("a and b are on the same side: %v", err)
	}
	heal(context.Background())

	// One way, seen with UDP: a's datagrams to b are dropped, b's to a arrive.
	heal, err = build(t, "one-way", "to: [b]").Start(context.Background(), env, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer heal(context.Background())
	if udpArrives("127.0.0.61", "127.0.0.62") {
		t.Error("a -> b arrived through a one-way cut")
	}
	if !udpArrives("127.0.0.62", "127.0.0.61") {
		t.Error("b -> a was cut by a one-way fault from a")
	}
}

func udpArrives(from, to string) bool {
	rc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(to)})
	if err != nil {
		return false
	}
	defer rc.Close()
	sc, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, rc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return false
	}
	defer sc.Close()
	sc.Write([]byte("x"))
	rc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 4)
	_, err = rc.Read(buf)
	return err == nil
}

// TestStaleChainsRemoved: a chain left by a harness that was killed (its
// pid is gone) is removed by the next run.
func TestStaleChainsRemoved(t *testing.T) {
	needFirewall(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	chain := fmt.Sprintf("%s%d", cluster.ChainPrefix, dead.Process.Pid)
	for _, args := range [][]string{{"-N", chain}, {"-I", "OUTPUT", "-j", chain}, {"-A", chain, "-s", "127.0.0.71", "-d", "127.0.0.72", "-j", "DROP"}} {
		if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if err := cluster.CleanStaleChains(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("iptables", "-w", "-S").Output()
	if strings.Contains(string(out), chain) {
		t.Errorf("stale chain %s survived:\n%s", chain, out)
	}
}
