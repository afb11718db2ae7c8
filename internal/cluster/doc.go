// Package cluster starts, watches and stops the real servers of a lock
// backend, and owns everything a run puts on the machine for them.
//
// A server kind (redis.go, etcd.go, consul.go, zookeeper.go, postgres.go,
// sentinel.go, pgbouncer.go) says how to launch its members, how to tell
// that the cluster is healthy and this run's, and which member leads
// (its file registers a Kind, kind.go). Where the servers run is a
// placement chosen once per cluster (placement.go), each in its own file:
// on loopback, each server on an address of the run's own /16 slot
// (loopback.go, slot.go); in hosts mode, each server and worker a network
// namespace of its own on a bridge (onhosts.go, hosts.go); existing
// servers named by a targets file, nothing started, nothing stopped
// (external.go); or a compose topology's containers (compose.go). The
// Cluster's methods delegate to it and never ask which one it is.
// Links go through toxiproxy only where a fault needs one (toxi.go);
// address-level faults are iptables rules in a chain of the run's own
// (firewall.go); CPU and disk faults are cgroups (cgroup.go); PostgreSQL's
// clock is libfaketime's (faketime.go); power losses and full disks are a
// FUSE layer under the data dirs (power.go, on internal/powerfs).
//
// Every child runs in its own process group (so a server's own children die
// with it) and with the parent-death signal set to SIGKILL (so that even a
// harness killed with SIGKILL takes its children along). Teardown kills each
// group with SIGKILL: there is nothing a lock server must flush for a
// benchmark, and a graceful stop could hang on a paused process. What a
// killed run left the next run removes: data dirs (and the dead FUSE
// mounts in them), iptables chains and cgroups named after a harness whose
// process is gone; namespaces and
// containers of a slot whose flock it now holds (proof their owner is gone).
package cluster
