package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
)

// NATSBinary is the nats-server executable to run (Debian 12's package
// nats-server, 2.9.10).
var NATSBinary = "nats-server"

func init() {
	RegisterKind(Kind{Name: "nats", Start: startNATS, Binary: natsBinary, Version: natsVersion, Short: natsShort,
		// A Go program: libfaketime does not move its clock, and no fault
		// speaks its protocol (its faults are a process's and a link's).
		Faults:      faults.Abilities{Clock: faults.ClockNone},
		Credentials: "nats",
		Setup:       Setup{Apt: []Package{{Name: "nats-server", Present: "command -v nats-server || [ -x /usr/sbin/nats-server ]"}}},
		NotDeployed: "the job brokers' server runs only where lockbench starts it"})
}

func natsBinary() (string, error) {
	p, err := exec.LookPath(NATSBinary)
	if err != nil {
		// Debian installs it in /usr/sbin, which a user's PATH may lack.
		if _, serr := exec.LookPath("/usr/sbin/" + NATSBinary); serr == nil {
			return "/usr/sbin/" + NATSBinary, nil
		}
		return "", fmt.Errorf("%w: %s; install it with `apt-get install -y nats-server` (or run `make setup` as root)", ErrMissingBinary, NATSBinary)
	}
	return p, nil
}

func natsVersion() string {
	bin, err := natsBinary()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return firstLine(bin, "--version")
}

// natsShort: "nats-server: v2.9.10" is "nats 2.9.10".
func natsShort(v string) string {
	if rest, ok := strings.CutPrefix(v, "nats-server: v"); ok {
		return "nats " + rest
	}
	return v
}

// natsName is the server name a run gives its NATS server: the readiness
// check reads it back from the server's INFO, proof that the server
// answering is this run's.
func natsName(runID, name string) string { return "lockbench-" + runID + "-" + name }

// startNATS starts independent nats-server processes with JetStream on,
// each on its own loopback address, its store (JetStream's streams and
// consumers, in files) in its data dir: a power loss discards what it
// wrote and never fsynced, a kill what it had not yet written.
func startNATS(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error {
	bin, err := natsBinary()
	if err != nil {
		return err
	}
	for _, sp := range specs {
		s, port, err := c.newServer(sp)
		if err != nil {
			return err
		}
		name := natsName(c.RunID, sp.Name)
		args := append([]string{"-a", s.IP, "-p", fmt.Sprint(port), "-n", name, "-js", "-sd", s.Dir}, sp.Args...)
		s.command = func() (*exec.Cmd, error) { return exec.Command(bin, args...), nil }
		s.ready = func(ctx context.Context, p *procgroup.Process) error {
			return poll(ctx, p, 20*time.Second, func() error { return natsReady(ctx, s.Addr, name) })
		}
		if err := c.launch(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// natsReady connects to addr and checks that the server answering is
// named name and serves JetStream (its account info answers).
func natsReady(ctx context.Context, addr, name string) error {
	nc, err := nats.Connect("nats://"+addr, nats.Timeout(time.Second), nats.NoReconnect(), nats.Name("lockbench-ready"))
	if err != nil {
		return err
	}
	defer nc.Close()
	if got := nc.ConnectedServerName(); got != name {
		return fmt.Errorf("the server answering on %s is %q, not this run's %q", addr, got, name)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := js.AccountInfo(actx); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}
