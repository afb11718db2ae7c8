package cluster

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
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

// memberAnswer is one member's answer to a question about the cluster.
type memberAnswer[T any] struct {
	s   *Server
	v   T
	err error
}

// askMembers asks every member at once, each for at most timeout (and
// ctx), and returns the answers in the members' order. At once, because
// a member that is stopped (a pause fault) or cut off accepts a
// connection and never answers: asked one after another, it would spend
// the whole deadline and leave the others unasked, and the leader would
// look lost exactly while one member is paused.
func askMembers[T any](ctx context.Context, members []*Server, timeout time.Duration, ask func(context.Context, *Server) (T, error)) []memberAnswer[T] {
	out := make([]memberAnswer[T], len(members))
	var wg sync.WaitGroup
	for i, s := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := ask(actx, s)
			out[i] = memberAnswer[T]{s: s, v: v, err: err}
		}()
	}
	wg.Wait()
	return out
}

// mostNamed is the name most members answered ("" when none did); on a
// tie, the first in the members' order.
func mostNamed(answers []memberAnswer[string]) string {
	votes := map[string]int{}
	best := ""
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		if votes[a.v]++; best == "" || votes[a.v] > votes[best] {
			best = a.v
		}
	}
	return best
}
