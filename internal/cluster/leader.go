package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoLeader means the cluster has no server kind with a leader.
var ErrNoLeader = errors.New("no server of this cluster has a leader or master role")

// HasLeader reports whether servers of kind have a leader (or master) that
// Leader can find.
func HasLeader(kind string) bool {
	switch kind {
	case "etcd", "consul", "zookeeper", "redis-replicated", "sentinel":
		return true
	}
	return false
}

// Leader returns the name of the server that is the current leader (etcd,
// Consul, ZooKeeper) or master (Redis with Sentinel, as the Sentinels see
// it), asked at this moment.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	// A member known dead cannot lead; asking it could hang (on a host or
	// a container, a dead address times out rather than refusing).
	kinds := map[string][]*Server{}
	for _, name := range c.Names() {
		s := c.Server(name)
		if p := s.Process(); p != nil && !p.Alive() {
			continue
		}
		kinds[s.Spec.Kind] = append(kinds[s.Spec.Kind], s)
	}
	switch {
	case len(kinds["etcd"]) > 0:
		return etcdLeader(ctx, kinds["etcd"])
	case len(kinds["consul"]) > 0:
		return consulLeader(kinds["consul"])
	case len(kinds["zookeeper"]) > 0:
		for _, s := range kinds["zookeeper"] {
			if m, err := zkMode(s.Addr); err == nil && m == "leader" {
				return s.Spec.Name, nil
			}
		}
		return "", errors.New("no zookeeper member says it is the leader")
	case len(kinds["sentinel"]) > 0:
		return sentinelMaster(ctx, kinds["sentinel"], kinds["redis-replicated"])
	}
	return "", ErrNoLeader
}

func etcdLeader(ctx context.Context, members []*Server) (string, error) {
	cl := http.Client{Timeout: time.Second}
	ids := map[string]string{}
	var leader string
	for _, s := range members {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Addr+"/v3/maintenance/status", strings.NewReader("{}"))
		if err != nil {
			return "", err
		}
		resp, err := cl.Do(req)
		if err != nil {
			continue // a dead member cannot be the leader
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			continue
		}
		ids[st.Header.MemberID] = s.Spec.Name
		if st.Leader != "" && st.Leader != "0" {
			leader = st.Leader
		}
	}
	if name, ok := ids[leader]; ok {
		return name, nil
	}
	return "", fmt.Errorf("no etcd member reports a live leader (leader id %q)", leader)
}

func consulLeader(servers []*Server) (string, error) {
	cl := http.Client{Timeout: time.Second}
	for _, s := range servers {
		resp, err := cl.Get("http://" + s.Addr + "/v1/status/leader")
		if err != nil {
			continue
		}
		var addr string
		err = json.NewDecoder(resp.Body).Decode(&addr)
		resp.Body.Close()
		if err != nil || addr == "" {
			continue
		}
		ip, _, _ := strings.Cut(addr, ":")
		for _, t := range servers {
			if t.IP == ip {
				return t.Spec.Name, nil
			}
		}
	}
	return "", errors.New("no consul server reports a leader")
}

func sentinelMaster(ctx context.Context, sentinels, redises []*Server) (string, error) {
	for _, s := range sentinels {
		cl := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		addr, err := cl.GetMasterAddrByName(ctx, SentinelMaster).Result()
		cl.Close()
		if err != nil || len(addr) != 2 {
			continue
		}
		hostport := addr[0] + ":" + addr[1]
		for _, r := range redises {
			if r.Addr == hostport {
				return r.Spec.Name, nil
			}
		}
	}
	return "", errors.New("no sentinel names a known master")
}
