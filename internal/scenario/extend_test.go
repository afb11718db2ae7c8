package scenario

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
)

// kvBackend is a backend of a server kind this test adds, as
// docs/extending.md says to: one backend and one cluster.Kind.
type kvBackend struct{}

func (kvBackend) Servers() []backends.ServerSpec {
	return []backends.ServerSpec{{Kind: "test-kv", Name: "kv-1"}, {Kind: "test-kv", Name: "kv-2"}, {Kind: "test-kv", Name: "kv-3"}}
}
func (kvBackend) Fenced() bool { return true }
func (kvBackend) Open(context.Context, backends.Env) (backends.Locker, error) {
	return nil, errors.New("not for running")
}

type slowFault struct{}

func (slowFault) Start(context.Context, faults.Env, faults.Target) (*faults.Effect, error) {
	return nil, errors.New("not for running")
}

func init() {
	backends.Register(backends.Info{Name: "test-kv", Summary: "a backend added by a test", New: func(backends.Decoder) (backends.Backend, error) { return kvBackend{}, nil }})
	cluster.RegisterKind(cluster.Kind{Name: "test-kv",
		Start: func(context.Context, *cluster.Cluster, []backends.ServerSpec) error {
			return errors.New("not for running")
		},
		Binary:  func() (string, error) { return "/bin/true", nil },
		Version: func() string { return "test-kv 1" },
		Leader:  func(context.Context, map[string][]*cluster.Server) (string, error) { return "kv-1", nil },
		Links:   func(specs []backends.ServerSpec) []string { return []string{specs[0].Name + "-peer"} }})
	faults.Register(faults.Info{Name: "test-slow", Summary: "a fault added by a test", Targets: []faults.Kind{faults.Link},
		Example: faults.Example{Backend: "redis", Fault: "{type: test-slow, target: link:redis-1}"},
		Classes: map[faults.Kind]string{faults.Link: history.ClassSlow}, New: func(faults.Decoder) (faults.Fault, error) { return slowFault{}, nil }})
}

// TestExtendingIsOneFileEach: a server kind, its backend and a fault,
// each registered the way docs/extending.md says and nowhere else, are
// whole to the scenario: the kind's leader resolves the leader role, its
// server-side link is a target, the fault acts on links, and what the kind
// lacks (a master) is refused.
func TestExtendingIsOneFileEach(t *testing.T) {
	src := `name: t
workload: {duration: 3s, instances: 2}
cases:
  - name: c
    backend: test-kv
    faults:
      - {type: test-slow, target: link:kv-1-peer, at: 1s, for: 1s}
      - {type: pause, target: leader, at: 1s, for: 1s}
      - {type: test-slow, target: link:kv-2@instance-1, at: 2s, for: 500ms}
`
	s, err := Parse("extend.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m := s.Cases[0].Meta()
	if len(m.Faults) != 3 || m.Faults[0].Class != history.ClassSlow {
		t.Errorf("schedule: %+v", m.Faults)
	}
	bad := strings.Replace(src, "target: leader", "target: master", 1)
	if _, err := Parse("extend.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), `role "master" cannot be resolved`) {
		t.Errorf("a kind without a master: %v", err)
	}
}
