package firewall

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSpec: the one rule every cut is made of, for each kind of pair.
func TestSpec(t *testing.T) {
	a, b := Endpoint{IP: "127.64.0.10"}, Endpoint{IP: "127.64.0.11"}
	mark := InstanceMark(3, 2)
	for _, tt := range []struct {
		name     string
		src, dst Endpoint
		p        float64
		want     string
	}{
		{"every packet between two addresses", a, b, 1, "-s 127.64.0.10 -d 127.64.0.11 -m comment --comment c -j DROP"},
		{"a share of them", a, b, 0.25, "-s 127.64.0.10 -d 127.64.0.11 -m statistic --mode random --probability 0.2500 -m comment --comment c -j DROP"},
		{"to a proxy's port: TCP", a, Endpoint{IP: "127.64.0.1", Port: 4000}, 1, "-s 127.64.0.10 -d 127.64.0.1 -p tcp --dport 4000 -m comment --comment c -j DROP"},
		{"one protocol", a, Endpoint{IP: b.IP, Proto: "udp"}, 1, "-s 127.64.0.10 -d 127.64.0.11 -p udp -m comment --comment c -j DROP"},
		{"from a marked instance to a remote server: its mark", Endpoint{IP: "127.64.1.2", Mark: mark}, Endpoint{IP: "10.0.0.5"}, 1, "-m mark --mark 0x4c030002 -d 10.0.0.5 -m comment --comment c -j DROP"},
		{"from a remote server to a marked instance: its connections' mark", Endpoint{IP: "10.0.0.5"}, Endpoint{IP: "127.64.1.2", Mark: mark}, 1, "-s 10.0.0.5 -m connmark --mark 0x4c030002 -m comment --comment c -j DROP"},
		{"a marked instance on loopback: its address", Endpoint{IP: "127.64.1.2", Mark: mark}, b, 1, "-s 127.64.1.2 -d 127.64.0.11 -m comment --comment c -j DROP"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(Spec(tt.src, tt.dst, tt.p, "c"), " "); got != tt.want {
				t.Errorf("Spec = %s\nwant   %s", got, tt.want)
			}
		})
	}
}

func TestNamesAndMarks(t *testing.T) {
	if got := Name(42); got != "LOCKBENCH-42" {
		t.Errorf("Name(42) = %s", got)
	}
	if got := InstanceMark(1, 7); got != 0x4c010007 {
		t.Errorf("InstanceMark(1, 7) = %#x", got)
	}
	if InstanceMark(1, 7) == InstanceMark(2, 7) || InstanceMark(1, 7) == InstanceMark(1, 8) {
		t.Error("two slots or two instances share a mark")
	}
	want := "while iptables -w -D OUTPUT -j LOCKBENCH-9 2>/dev/null; do :; done; while iptables -w -D INPUT ! -i lo -j LOCKBENCH-9 2>/dev/null; do :; done; iptables -w -F LOCKBENCH-9 && iptables -w -X LOCKBENCH-9"
	if got := RemoveScript("LOCKBENCH-9"); got != want {
		t.Errorf("RemoveScript = %s", got)
	}
}

func TestPackets(t *testing.T) {
	listing := `Chain LOCKBENCH-9 (2 references)
    pkts      bytes target     prot opt in     out     source               destination
       0        0 CONNMARK   all  --  *      *       0.0.0.0/0            0.0.0.0/0            mark match 0x4c000000/0xff000000 CONNMARK save
      17     1020 DROP       all  --  *      *       127.64.0.10          127.64.0.11          /* lockbench-1 */
       3      180 DROP       all  --  *      *       127.64.0.11          127.64.0.10          /* lockbench-12 */`
	for comment, want := range map[string]int64{"lockbench-1": 17, "lockbench-12": 3} {
		if n, err := Packets(listing, comment, "LOCKBENCH-9"); err != nil || n != want {
			t.Errorf("Packets(%s) = %d, %v; want %d", comment, n, err, want)
		}
	}
	if _, err := Packets(listing, "lockbench-2", "LOCKBENCH-9"); err == nil || !strings.Contains(err.Error(), "lockbench-2 not found in LOCKBENCH-9") {
		t.Errorf("a missing rule: %v", err)
	}
}

// TestChainCutsAndCounts makes a real chain (root and iptables only):
// a rule is in it until Undo, and Close leaves no chain behind.
func TestChainCutsAndCounts(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no iptables here: %v", err)
	}
	c := New()
	r, err := c.Drop(Endpoint{IP: "127.250.0.1"}, Endpoint{IP: "127.250.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Packets(); err != nil || n != 0 {
		t.Errorf("a fresh rule: %d packets, %v", n, err)
	}
	if err := r.Undo(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if exec.Command("iptables", "-w", "-S", Name(os.Getpid())).Run() == nil {
		t.Errorf("chain %s is still there after Close", Name(os.Getpid()))
	}
}
