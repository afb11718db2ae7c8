package runner

import (
	"testing"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/scenario"
)

// TestPlanLinks: a link fault gets the proxies it acts on, and no more; a
// link scoped to an instance role (@holder) gets one on every instance,
// since any of them may hold when the fault begins.
func TestPlanLinks(t *testing.T) {
	src := `name: t
workload: {duration: 3s, instances: 3}
cases:
  - name: c
    backend: etcd
    faults:
      - {type: drop, target: "link:etcd-*@holder", at: 1s, for: 1s}
      - {type: latency, latency: 5ms, target: link:etcd-2@instance-2, at: 1s, for: 1s}
      - {type: partition, target: link:etcd-1-peer, at: 1s, for: 1s}
`
	s, err := scenario.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p := planLinks(s.Cases[0])
	for _, name := range []string{"etcd-1", "etcd-2", "etcd-3"} {
		for n := history.Instance(1); n <= 3; n++ {
			if !p.perInst[name][n] {
				t.Errorf("%s@instance-%d has no proxy", name, n)
			}
		}
	}
	if len(p.shared) != 0 || len(p.server) != 1 || p.server[0] != "etcd-1-peer" {
		t.Errorf("shared %v, server-side %v", p.shared, p.server)
	}
}
