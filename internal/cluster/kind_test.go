package cluster

import (
	"testing"

	"github.com/lockbench/lockbench/backends"
)

// TestEveryServerKindIsComplete: every server kind a backend asks for is
// registered, and every registered kind can start, find its binary and
// name its version; a kind with server-side links names them.
func TestEveryServerKindIsComplete(t *testing.T) {
	for _, k := range Kinds() {
		if k.Start == nil || k.Binary == nil || k.Version == nil {
			t.Errorf("server kind %s: Start, Binary and Version are required", k.Name)
		}
	}
	for _, info := range backends.All() {
		be, err := info.New(func(any) error { return nil })
		if err != nil {
			t.Errorf("backend %s with its defaults: %v", info.Name, err)
			continue
		}
		specs := be.Servers()
		for _, sp := range specs {
			if _, err := LookupKind(sp.Kind); err != nil {
				t.Errorf("backend %s: server %s: %v", info.Name, sp.Name, err)
			}
		}
		for _, l := range ServerLinks(specs) {
			if l == "" {
				t.Errorf("backend %s: an unnamed server-side link", info.Name)
			}
		}
	}
	if !HasLeader("etcd") || HasLeader("redis") || !IsMaster("redis-replicated") || IsMaster("etcd") || !BindsSource("consul") || BindsSource("zookeeper") {
		t.Error("leader, master and source-binding roles are not the kinds' own")
	}
}
