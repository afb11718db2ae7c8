package main

import (
	"testing"

	"github.com/lockbench/lockbench/internal/layout"
)

// TestKnownVersionsPerRow: a row lists the versions of the servers its own
// cases started; a run.json from before cases recorded their servers
// lists every server of the run; no run.json says so.
func TestKnownVersionsPerRow(t *testing.T) {
	rv := &layout.Run{Versions: map[string]string{
		"redis-server":              "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0",
		"etcd-server":               "etcd Version: 3.6.16",
		"github.com/redis/go-redis": "v9.21.0",
	}, Cases: []layout.RunCase{{Name: "S1-etcd#1", Servers: []string{"etcd"}}, {Name: "S1-redis#1", Servers: []string{"redis"}}}}
	old := &layout.Run{Versions: rv.Versions}
	for _, tc := range []struct {
		name  string
		rv    *layout.Run
		cases []string
		want  string
	}{
		{"etcd row", rv, []string{"S1-etcd#1"}, "etcd 3.6.16"},
		{"redis row", rv, []string{"S1-redis#1"}, "redis 7.0.15"},
		{"both", rv, []string{"S1-etcd#1", "S1-redis#1"}, "etcd 3.6.16, redis 7.0.15"},
		{"servers not recorded", old, []string{"S1-etcd#1"}, "etcd 3.6.16, redis 7.0.15"},
		{"no run.json", nil, []string{"x"}, "?"},
	} {
		if got := serverVersions(tc.rv, tc.cases); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
