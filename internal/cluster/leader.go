package cluster

import (
	"context"
	"errors"
	"sort"
)

// ErrNoLeader means the cluster has no server kind with a leader.
var ErrNoLeader = errors.New("no server of this cluster has a leader or master role")

// Leader returns the name of the server that is the current leader (etcd,
// Consul, ZooKeeper) or master (Redis with Sentinel, as the Sentinels see
// it), asked at this moment.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	// A member known dead cannot lead; asking it could hang (on a host or
	// a container, a dead address times out rather than refusing).
	live := map[string][]*Server{}
	for _, name := range c.Names() {
		s := c.Server(name)
		if p := s.Process(); p != nil && !p.Alive() {
			continue
		}
		live[s.Spec.Kind] = append(live[s.Spec.Kind], s)
	}
	names := make([]string, 0, len(live))
	for k := range live {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if k, err := LookupKind(name); err == nil && k.Leader != nil {
			return k.Leader(ctx, live)
		}
	}
	return "", ErrNoLeader
}
