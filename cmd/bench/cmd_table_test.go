package main

import "testing"

// TestKnownVersionsPerRow: a row lists the versions of the servers its own
// cases started; a run.json from before cases recorded their servers
// lists every server of the run; no run.json says so.
func TestKnownVersionsPerRow(t *testing.T) {
	rv := runVersions{ok: true, Versions: map[string]string{
		"redis-server":              "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0",
		"etcd-server":               "etcd Version: 3.6.16",
		"github.com/redis/go-redis": "v9.21.0",
	}}
	rv.Cases = append(rv.Cases, struct {
		Name    string   `json:"name"`
		Servers []string `json:"servers"`
	}{"S1-etcd#1", []string{"etcd"}}, struct {
		Name    string   `json:"name"`
		Servers []string `json:"servers"`
	}{"S1-redis#1", []string{"redis"}})
	old := runVersions{ok: true, Versions: rv.Versions}
	for _, tc := range []struct {
		name  string
		rv    runVersions
		cases []string
		want  string
	}{
		{"etcd row", rv, []string{"S1-etcd#1"}, "etcd 3.6.16"},
		{"redis row", rv, []string{"S1-redis#1"}, "redis 7.0.15"},
		{"both", rv, []string{"S1-etcd#1", "S1-redis#1"}, "etcd 3.6.16, redis 7.0.15"},
		{"servers not recorded", old, []string{"S1-etcd#1"}, "etcd 3.6.16, redis 7.0.15"},
		{"no run.json", runVersions{}, []string{"x"}, "?"},
	} {
		if got := tc.rv.of(tc.cases); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
