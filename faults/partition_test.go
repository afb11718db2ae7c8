package faults_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/slot"
	"github.com/lockbench/lockbench/internal/premise"
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

// cutMargins are how long a dial or a datagram across a cut is given to
// get through (it must not): each one's premise is that a path not cut,
// timed beside it, got through in under a quarter of it.
var cutMargins = []time.Duration{300 * time.Millisecond, 2 * time.Second, 8 * time.Second}

// timedDial dials a path that must be open (with a minute: a hang's
// bound), failing the test if it is not, and says how long it took.
func timedDial(t *testing.T, from, to string) time.Duration {
	t.Helper()
	clock := premise.Start()
	if err := bound(from, to, time.Minute); err != nil {
		t.Errorf("%s -> %s must get through: %v", from, to, err)
	}
	return clock.Since()
}

// slowOpen is the premise unmet when a path not cut took more than a
// quarter of what a cut one was given: silence then proves nothing.
func slowOpen(open, quiet time.Duration) string {
	if open*4 > quiet {
		return fmt.Sprintf("a dial on a path not cut took %s, too near the %s a cut one was given", open.Round(time.Millisecond), quiet)
	}
	return ""
}

func TestIsolateCutsBothWays(t *testing.T) {
	needFirewall(t)
	env, a, b, c := firewallEnv(t)
	addrB, addrA, addrC := listen(t, b), listen(t, a), listen(t, c)
	premise.Retry(t, cutMargins, func(quiet time.Duration) string {
		eff, err := build(t, "isolate", "").Start(context.Background(), env, faults.ParseTarget("a"))
		if err != nil {
			t.Fatal(err)
		}
		open := timedDial(t, b, addrC) // b and c must still talk
		if bound(a, addrB, quiet) == nil || bound(b, addrA, quiet) == nil {
			t.Error("a and b still reach each other while a is isolated")
		}
		open = max(open, timedDial(t, b, addrC))
		if obs, err := check(t, eff); err != nil || !strings.Contains(obs, "dropped") {
			t.Errorf("check: %q %v, want dropped packets observed", obs, err)
		}
		heal(t, eff)
		timedDial(t, a, addrB) // after heal
		return slowOpen(open, quiet)
	})
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
	t.Run("split", func(t *testing.T) {
		premise.Retry(t, cutMargins, func(quiet time.Duration) string {
			eff, err := build(t, "split", "group: [b]").Start(context.Background(), env, faults.ParseTarget("a"))
			if err != nil {
				t.Fatal(err)
			}
			open := timedDial(t, a, addrB) // a and b are on the same side
			if bound(b, addrC, quiet) == nil {
				t.Error("b reaches c across the split")
			}
			open = max(open, timedDial(t, a, addrB))
			heal(t, eff)
			return slowOpen(open, quiet)
		})
	})
	// One way, seen with UDP: a's datagrams to b are dropped, b's to a arrive.
	t.Run("one-way", func(t *testing.T) {
		premise.Retry(t, cutMargins, func(quiet time.Duration) string {
			eff, err := build(t, "one-way", "to: [b]").Start(context.Background(), env, faults.ParseTarget("a"))
			if err != nil {
				t.Fatal(err)
			}
			through, _ := udpArrives(t, a, b, quiet)
			back, took := udpArrives(t, b, a, time.Minute)
			heal(t, eff)
			if through {
				t.Error("a -> b arrived through a one-way cut")
			}
			if !back {
				t.Error("b -> a was cut by a one-way fault from a")
			}
			again, tookAgain := udpArrives(t, a, b, time.Minute)
			if !again {
				t.Error("a -> b does not arrive after the heal")
			}
			if slowest := max(took, tookAgain); slowest*4 > quiet {
				return fmt.Sprintf("a datagram on a path not cut took %s to be read, too near the %s a cut one was given", slowest.Round(time.Millisecond), quiet)
			}
			return ""
		})
	})
}

// udpArrives sends one datagram from one address to another and says
// whether it was there to be read within wait, and when it was. The
// receiver's queue is read without a deadline (a deadline that passed
// while the reader was not scheduled would call a datagram already queued
// lost), a last time once wait has passed.
func udpArrives(t *testing.T, from, to string, wait time.Duration) (bool, time.Duration) {
	t.Helper()
	rc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(to)})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sc, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, rc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	raw, err := rc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	queued := func() bool {
		n := -1
		raw.Read(func(fd uintptr) bool {
			n, _, _ = syscall.Recvfrom(int(fd), make([]byte, 4), syscall.MSG_DONTWAIT)
			return true
		})
		return n > 0
	}
	clock := premise.Start()
	sc.Write([]byte("x")) // a cut on the way out refuses it (EPERM): not arrived
	for {
		past := clock.Since() >= wait
		if queued() {
			return true, clock.Since()
		}
		if past {
			return false, clock.Since()
		}
		time.Sleep(time.Millisecond)
	}
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
