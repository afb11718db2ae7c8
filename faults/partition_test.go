package faults_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/firewall"
	"github.com/lockbench/lockbench/internal/slot"
)

func needFirewall(t *testing.T) {
	t.Helper()
	if err := firewall.Available(); err != nil {
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

// firewallEnv has three members a, b, c on addresses of a slot of its own.
func firewallEnv(t *testing.T) (*testEnv, string, string, string) {
	sl, err := slot.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	fw := firewall.New()
	t.Cleanup(func() { fw.Close(); sl.Release() })
	a, b, c := sl.Server(1), sl.Server(2), sl.Server(3)
	return &testEnv{fw: fw,
		servers: map[string]string{"a": a, "b": b, "c": c},
		peers:   map[string][]string{"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b"}}}, a, b, c
}

func TestIsolateCutsBothWays(t *testing.T) {
	needFirewall(t)
	env, a, b, c := firewallEnv(t)
	addrB, addrA, addrC := listen(t, b), listen(t, a), listen(t, c)
	eff, err := build(t, "isolate", "").Start(context.Background(), env, faults.ParseTarget("a"))
	if err != nil {
		t.Fatal(err)
	}
	if bound(a, addrB, 300*time.Millisecond) == nil || bound(b, addrA, 300*time.Millisecond) == nil {
		t.Error("a and b still reach each other while a is isolated")
	}
	if err := bound(b, addrC, time.Second); err != nil {
		t.Errorf("b and c must still talk: %v", err)
	}
	if obs, err := check(t, eff); err != nil || !strings.Contains(obs, "dropped") {
		t.Errorf("check: %q %v, want dropped packets observed", obs, err)
	}
	heal(t, eff)
	if err := bound(a, addrB, time.Second); err != nil {
		t.Errorf("after heal: %v", err)
	}
}

// TestCutNobodyCrossesIsNotObserved: rules that drop nothing did nothing.
func TestCutNobodyCrossesIsNotObserved(t *testing.T) {
	needFirewall(t)
	env, _, _, _ := firewallEnv(t)
	eff, err := build(t, "isolate", "").Start(context.Background(), env, faults.ParseTarget("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer heal(t, eff)
	if _, err := check(t, eff); err == nil || !strings.Contains(err.Error(), "dropped no packet") {
		t.Errorf("check: %v, want no packet dropped", err)
	}
}

// TestCutMeantToPreventTraffic: with observe: no-traffic a cut nobody
// tried to cross is observed, by its rules staying in force; a rule gone
// before the end is not (the cut did not hold for the window).
func TestCutMeantToPreventTraffic(t *testing.T) {
	needFirewall(t)
	env, _, _, _ := firewallEnv(t)
	eff, err := build(t, "isolate", "observe: no-traffic").Start(context.Background(), env, faults.ParseTarget("a"))
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := check(t, eff); err != nil || !strings.Contains(obs, "nothing crossed") {
		t.Errorf("check: %q %v, want the cut observed as no traffic", obs, err)
	}
	heal(t, eff)
	// The rules removed behind its back: the check cannot read them.
	gone, err := build(t, "one-way", "observe: no-traffic").Start(context.Background(), env, faults.ParseTarget("a"))
	if err != nil {
		t.Fatal(err)
	}
	heal(t, gone)
	if obs, err := check(t, gone); err == nil {
		t.Errorf("check after the rules were removed: %q, want an error", obs)
	}
}

func TestSplitAndOneWay(t *testing.T) {
	needFirewall(t)
	env, a, b, c := firewallEnv(t)
	addrC := listen(t, c)
	addrB := listen(t, b)
	eff, err := build(t, "split", "group: [b]").Start(context.Background(), env, faults.ParseTarget("a"))
	if err != nil {
		t.Fatal(err)
	}
	if bound(b, addrC, 300*time.Millisecond) == nil {
		t.Error("b reaches c across the split")
	}
	if err := bound(a, addrB, time.Second); err != nil {
		t.Errorf("a and b are on the same side: %v", err)
	}
	heal(t, eff)

	// One way, seen with UDP: a's datagrams to b are dropped, b's to a arrive.
	eff, err = build(t, "one-way", "to: [b]").Start(context.Background(), env, faults.ParseTarget("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer heal(t, eff)
	if udpArrives(a, b) {
		t.Error("a -> b arrived through a one-way cut")
	}
	if !udpArrives(b, a) {
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
	chain := fmt.Sprintf("%s%d", firewall.ChainPrefix, dead.Process.Pid)
	for _, args := range [][]string{{"-N", chain}, {"-I", "OUTPUT", "-j", chain}, {"-A", chain, "-s", "127.0.0.71", "-d", "127.0.0.72", "-j", "DROP"}} {
		if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if err := firewall.CleanStale(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("iptables", "-w", "-S").Output()
	if strings.Contains(string(out), chain) {
		t.Errorf("stale chain %s survived:\n%s", chain, out)
	}
}
