package scenario

import (
	"strings"
	"testing"
)

const jobsHead = "name: t\nworkload: {duration: 2s, jobs: {count: 10, every: 40ms, grace: 1s}}\ncases:\n"

// TestJobStrategyBackends: a strategy that campaigns needs a backend that
// elects; a broker's strategy takes none and brings its broker into the
// cluster, where faults can name it and its clients' links.
func TestJobStrategyBackends(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"  - {name: c, strategy: leader}\n", "campaigns in the case's backend's election: name its backend"},
		{"  - {name: c, backend: redis, strategy: leader}\n", "backend redis has none"},
		{"  - {name: c, backend: redis, strategy: nats}\n", "takes no lock: leave the backend out"},
		{"  - {name: c, strategy: nats, strategy_options: {ack_wait: 0s}}\n", "ack_wait"},
	} {
		_, err := Parse("j.yaml", []byte(jobsHead+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.body, err, tc.want)
		}
	}
	s, err := Parse("j.yaml", []byte(jobsHead+
		"  - {name: n, strategy: nats, faults: [{type: kill, target: nats-1, at: 1s, for: 100ms}, {type: drop, target: 'link:nats-1@holder', at: 500ms, for: 100ms}]}\n"+
		"  - {name: l, backend: etcd, strategy: leader, strategy_options: {fenced: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range s.Cases[0].Servers() {
		names = append(names, sp.Kind+":"+sp.Name)
	}
	if got := strings.Join(names, " "); got != "postgres:postgres-1 nats:nats-1" {
		t.Errorf("nats case's servers: %s", got)
	}
	if m := s.Cases[1].Meta(); m.Jobs == nil || m.Jobs.Lock || !m.Lockless || m.Backend != "etcd" {
		t.Errorf("leader case's meta: %+v", m)
	}
}
