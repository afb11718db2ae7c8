// Package cluster starts, finds, watches and stops the servers of a lock
// backend for one case, where the run's deployment mode puts them.
//
// A server kind (redis.go, etcd.go, consul.go, zookeeper.go, postgres.go,
// sentinel.go, pgbouncer.go, nats.go) says how to launch its members, how to tell
// that the cluster is healthy and this run's, and which member leads (its
// file registers a Kind, kind.go; launch.go is what its Start uses). A
// deployment mode (mode.go) is chosen once, at validation (ModeOf), and
// each is one file that registers it and makes its placement
// (placement.go): on loopback, each server on an address of the run's own
// slot (loopback.go); in hosts mode, each server and worker in a network
// namespace of its own (onhosts.go); a targets file's servers, only talked
// to (external.go), acted on over SSH (onssh.go) or in Kubernetes pods
// (kubernetes.go, onkube.go); a compose topology's containers
// (compose.go). What every placement does is one small interface; what
// only some can do (kill, signal, cut a server, netem, hosts for
// instances, reuse, clocks) an interface of its own, which the Cluster's
// methods find by type assertion, refusing in one place what the mode
// lacks (actions.go). Links go through toxiproxy only where a fault needs
// one (toxi.go); power losses and full disks are a FUSE layer under the
// data dirs (power.go); a server's clock is libfaketime's (faketime.go).
//
// The machinery is in leaf packages of its own, each with its tests:
// address slots (internal/machinery/slot), iptables (internal/machinery/firewall), network
// namespaces and netem (internal/machinery/netns), cgroups (internal/machinery/cgroup),
// process groups, containers and remote processes (internal/machinery/procgroup),
// the Docker CLI (internal/machinery/docker), the shell on a server's host over SSH
// or in a pod (internal/machinery/remote), libfaketime (internal/machinery/faketime), the FUSE
// layer (internal/machinery/powerfs) and Kubernetes objects (internal/machinery/kube).
//
// Every child runs in its own process group (so a server's own children die
// with it) and with the parent-death signal set to SIGKILL (so that even a
// harness killed with SIGKILL takes its children along). Teardown kills each
// group with SIGKILL: there is nothing a lock server must flush for a
// benchmark, and a graceful stop could hang on a paused process. What a
// killed run left the next run removes: data dirs (and the dead FUSE
// mounts in them), iptables chains and cgroups named after a harness whose
// process is gone; namespaces and containers of a slot whose flock it now
// holds (proof their owner is gone).
package cluster
