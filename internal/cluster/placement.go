package cluster

import (
	"context"
	"os/exec"
	"syscall"

	"github.com/lockbench/lockbench/backends"
)

// placement is where a cluster's servers and worker instances run, and so
// how lockbench acts on them. It is chosen once, in NewWith, from the
// options; the Cluster's methods never ask which one it is:
//
//   - loopback (loopback.go): servers lockbench starts,
//     each on an address of its own in the run's loopback slot; cuts are
//     rules in the harness's iptables chain.
//   - hosts (onhosts.go): the same servers, each server and each worker
//     instance in a network namespace of its own on a switch namespace;
//     cuts are rules in the receiving host's namespace.
//   - external (external.go): a targets file's servers, which lockbench
//     only talks to; it never signals, kills or firewalls them.
//   - compose (compose.go): a compose topology's containers, which it may
//     pause, kill, restart and cut through the engine, with the worker
//     instances as containers on the topology's network.
//
// A placement that cannot do what a method asks says so in its error; the
// scenario's validation refuses such faults before a run starts, so the
// error is a second line of defence.
type placement interface {
	// start brings up, or finds, the servers of specs.
	start(ctx context.Context, c *Cluster, specs []backends.ServerSpec) error
	// host readies the host of a server lockbench starts (sets s.NS).
	host(s *Server) error
	// port is a port a single-port server at ip may listen on.
	port(ip string) (int, error)
	// wrap makes the command of a server on host ns run there.
	wrap(ns string, cmd *exec.Cmd)
	kill(s *Server) error
	restart(ctx context.Context, c *Cluster, s *Server) error
	signal(s *Server, sig syscall.Signal) error
	// release lets go of a server when the cluster closes.
	release(s *Server) error
	// separable is nil when an address-level rule on s separates it from
	// its peers, or says why it would not.
	separable(s *Server) error
	// drop drops each packet from a to b with probability p.
	drop(a, b Endpoint, p float64) (Cut, error)
	// instance makes cmd (a worker instance) run on its own host at ip and
	// returns the name of the container it became, if any.
	instance(name, ip string, cmd *exec.Cmd) (string, error)
	// harnessIP is where the workers reach the harness's own listeners;
	// instanceIP is worker instance n's own address; instanceMark is the
	// mark its connections carry, where its address would not show on
	// the wire (0: none; see Endpoint.Mark).
	harnessIP() string
	instanceIP(n int) string
	instanceMark(n int) int
	// close removes what the placement made (namespaces, containers).
	close() error
	// reusable: its servers can be handed to the next case.
	reusable() bool
}
