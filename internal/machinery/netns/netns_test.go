package netns

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/slot"
)

// hostsChild is a helper process run inside a host's namespace:
// "listen ADDR" echoes lines; "dial ADDR WAIT" connects, sends one line
// and prints the round trip or the error, waiting WAIT for each.
func hostsChild(arg string) {
	verb, addr, _ := strings.Cut(arg, " ")
	switch verb {
	case "listen":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("listening")
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			go func() {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintln(c, sc.Text())
				}
				c.Close()
			}()
		}
	case "dial":
		addr, w, _ := strings.Cut(addr, " ")
		wait, _ := time.ParseDuration(w)
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, wait)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		defer c.Close()
		fmt.Fprintln(c, "ping")
		c.SetDeadline(time.Now().Add(wait))
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			fmt.Println("error", err)
			return
		}
		fmt.Println("ok", time.Since(start).Milliseconds())
	}
	os.Exit(0)
}

func TestMain(m *testing.M) {
	if arg := os.Getenv("LOCKBENCH_HOSTS_CHILD"); arg != "" {
		hostsChild(arg)
	}
	os.Exit(m.Run())
}

func child(h *Hosts, ns, arg string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKBENCH_HOSTS_CHILD="+arg)
	h.Wrap(ns, cmd)
	return cmd
}

// TestHosts: two hosts on the run's bridge reach each other and the
// harness; a DROP rule in the receiver's namespace cuts one direction
// silently and counts what it dropped; netem delays one host's packets to
// the other; Close leaves no namespace and no bridge; a run killed before
// its Close leaves nothing the next holder of the slot does not remove.
func TestHosts(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatalf("hosts mode unavailable here (the test machine runs as root with iproute2): %v", err)
	}
	s, err := slot.AcquireHosts()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	h, err := New(s.N, s.Harness())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			h.Close()
		}
	}()
	a, b := s.Server(1), s.Server(2)
	nsA, err := h.Add("a", a)
	if err != nil {
		t.Fatal(err)
	}
	nsB, err := h.Add("b", b)
	if err != nil {
		t.Fatal(err)
	}
	srv := child(h, nsB, "listen "+b+":7000")
	out, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); !strings.HasPrefix(line, "listening") {
		t.Fatalf("listener in %s: %q", nsB, line)
	}
	// A path that must be open gets a hang's bound; the cut one 2 s, its
	// silence proven by its rule's dropped packets.
	dialWithin := func(wait time.Duration) string {
		t.Helper()
		o, err := child(h, nsA, "dial "+b+":7000 "+wait.String()).Output()
		if err != nil {
			t.Fatalf("dial child: %v", err)
		}
		return strings.TrimSpace(string(o))
	}
	dial := func() string { t.Helper(); return dialWithin(time.Minute) }
	if got := dial(); !strings.HasPrefix(got, "ok") {
		t.Fatalf("host a cannot reach host b: %s", got)
	}
	if c, err := net.DialTimeout("tcp", b+":7000", time.Minute); err != nil {
		t.Fatalf("the harness cannot reach host b: %v", err)
	} else {
		c.Close()
	}

	rule, err := h.Drop(firewall.Endpoint{IP: a}, firewall.Endpoint{IP: b})
	if err != nil {
		t.Fatal(err)
	}
	if got := dialWithin(2 * time.Second); !strings.HasPrefix(got, "error") {
		t.Errorf("a reached b through a cut: %s", got)
	}
	if n, err := rule.Packets(); err != nil || n == 0 {
		t.Errorf("the rule dropped %d packets (%v)", n, err)
	}
	if err := rule.Undo(); err != nil {
		t.Fatal(err)
	}
	if got := dial(); !strings.HasPrefix(got, "ok") {
		t.Errorf("the cut outlived its undo: %s", got)
	}

	// netem where the kernel has it; where it does not (this project's
	// machine: CONFIG_NET_SCH_NETEM is off), the probe says so and Shape
	// fails rather than pretending.
	sh, err := h.Shape(nsA, []string{b}, 150*time.Millisecond, 0, 0)
	if nerr := NetemAvailable(); nerr != nil {
		if err == nil {
			t.Errorf("netem is unavailable (%v) yet Shape succeeded", nerr)
		}
		t.Logf("netem unavailable here: %v", nerr)
	} else {
		if err != nil {
			t.Fatal(err)
		}
		got := dial()
		var ms int
		fmt.Sscanf(got, "ok %d", &ms)
		if ms < 150 {
			t.Errorf("with 150ms of netem from a to b the round trip took %q", got)
		}
		if n, err := sh.Packets(); err != nil || n == 0 {
			t.Errorf("netem queue saw %d packets (%v)", n, err)
		}
		if err := sh.Undo(); err != nil {
			t.Fatal(err)
		}
	}

	srv.Process.Kill()
	srv.Wait()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if leftover(t, s.N) != "" {
		t.Errorf("after Close: %s", leftover(t, s.N))
	}

	// A run that dies without Close: the next holder cleans up.
	h2, err := New(s.N, s.Harness())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Add("c", s.Server(3)); err != nil {
		t.Fatal(err)
	}
	if err := CleanStale(s.N); err != nil {
		t.Fatal(err)
	}
	if l := leftover(t, s.N); l != "" {
		t.Errorf("after cleaning a dead run's slot: %s", l)
	}
}

// leftover lists the namespaces and bridge of slot n that still exist.
func leftover(t *testing.T, n int) string {
	t.Helper()
	var out []string
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(list), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], fmt.Sprintf("lb%d-", n)) {
			out = append(out, f[0])
		}
	}
	if exec.Command("ip", "link", "show", fmt.Sprintf("lbbr%d", n)).Run() == nil {
		out = append(out, fmt.Sprintf("lbbr%d", n))
	}
	return strings.Join(out, " ")
}
