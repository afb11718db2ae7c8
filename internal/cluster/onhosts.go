package cluster

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/machinery/firewall"
	"github.com/lockbench/lockbench/internal/machinery/netns"
)

// The hosts mode: everything the local mode does, cuts between any two
// servers, and netem.
func init() {
	RegisterMode(Mode{Name: ModeHosts, Title: "hosts", Faketime: true,
		Offers: map[faults.Action][]On{
			faults.ActSignal: every, faults.ActKill: every, faults.ActCut: every, faults.ActShape: every, faults.ActCPUQuota: every,
			faults.ActDiskThrottle: {OnServer}, faults.ActClock: {OnServer}, faults.ActClockRate: {OnServer},
			faults.ActPowerLoss: {OnServer}, faults.ActDiskFull: {OnServer}, faults.ActAdmin: {OnServer},
			faults.ActProxy: {OnClientLink, OnServerLink}},
		place: func(c *Cluster, _ Options) (placement, error) {
			h, err := netns.New(c.Slot.N, c.Slot.Harness())
			if err != nil {
				return nil, err
			}
			return &onHosts{own: own{slot: c.Slot}, h: h}, nil
		}})
}

// onHosts is the placement of hosts mode: lockbench's own servers, as on
// loopback, but each server and each worker instance in a network
// namespace of its own (see netns.Hosts), so that a cut separates any two
// of them, whatever address they send from, and every port is free.
type onHosts struct {
	own
	h *netns.Hosts
}

func (o *onHosts) host(s *Server) error {
	ns, err := o.h.Add(s.Spec.Name, s.IP)
	if err != nil {
		return err
	}
	s.NS = ns
	return nil
}

// port: a host of its own has every port free.
func (o *onHosts) port(string) (int, error) { return hostPort, nil }

// hostPort is the port a single-port server listens on in hosts mode.
const hostPort = 7000

func (o *onHosts) wrap(ns string, cmd *exec.Cmd) {
	if ns != "" {
		o.h.Wrap(ns, cmd)
	}
}

func (o *onHosts) separable(*Server) error { return nil }

func (o *onHosts) drop(a, b firewall.Endpoint, p float64) (firewall.Cut, error) {
	return o.h.DropSome(a, b, p)
}

func (o *onHosts) shape(ip string, to []string, delay, jitter time.Duration, loss float64) (firewall.Cut, error) {
	return o.h.Shape(o.h.NS(ip), to, delay, jitter, loss)
}

func (o *onHosts) instance(name, ip string, cmd *exec.Cmd) (string, error) {
	ns, err := o.h.Add(name, ip)
	if err != nil {
		return "", err
	}
	o.h.Wrap(ns, cmd)
	return "", nil
}

func (o *onHosts) close() error {
	if err := o.h.Close(); err != nil {
		return fmt.Errorf("remove the run's hosts: %w", err)
	}
	return nil
}
