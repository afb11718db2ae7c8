package faults

import (
	"testing"

	"github.com/lockbench/lockbench/history"
)

// TestParseTarget: every form of the grammar in Target's doc comment.
func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Target
		role bool
		lane bool
	}{
		{"redis-1", Target{Kind: Server, Name: "redis-1"}, false, false},
		{"leader", Target{Kind: Server, Name: "leader"}, true, false},
		{"master", Target{Kind: Server, Name: "master"}, true, false},
		{"instance-2", Target{Kind: Instance, Name: "instance-2", Instance: 2}, false, true},
		{"holder", Target{Kind: Instance, Name: "holder"}, true, true},
		{"a-waiter", Target{Kind: Instance, Name: "a-waiter"}, true, true},
		{"holder-of:k3", Target{Kind: Instance, Name: "holder-of:k3"}, true, true},
		{"link:redis-1", Target{Kind: Link, Name: "redis-1"}, false, false},
		{"link:etcd-1-peer", Target{Kind: Link, Name: "etcd-1-peer"}, false, false},
		{"link:resource@instance-3", Target{Kind: Link, Name: "resource", Scope: "instance-3", Instance: 3}, false, true},
		{"link:etcd-2@holder", Target{Kind: Link, Name: "etcd-2", Scope: "holder"}, true, true},
		// A link scoped to a server role is no lane's and no instance's.
		{"link:etcd-2@leader", Target{Kind: Link, Name: "etcd-2", Scope: "leader"}, true, false},
		// A connected member is a server, resolved at injection; it acts
		// on a server every side-by-side trial shares: no lane's.
		{"connected-member@instance-2", Target{Kind: Server, Name: "connected-member", Scope: "instance-2", Instance: 2}, true, false},
		{"connected-member@holder", Target{Kind: Server, Name: "connected-member", Scope: "holder"}, true, false},
		// Without its scope it names no one: a (bad) server name.
		{"connected-member@", Target{Kind: Server, Name: "connected-member@"}, false, false},
		// A server name with an @ is a (bad) name, for validation.
		{"redis-1@instance-2", Target{Kind: Server, Name: "redis-1@instance-2"}, false, false},
		// instance-02 is not instance-2: the name must round-trip.
		{"instance-02", Target{Kind: Instance, Name: "instance-02"}, false, true},
		// A job workload's executor, at any phase or at one.
		{"executor", Target{Kind: Instance, Name: "executor"}, true, true},
		{"executor@during-effect", Target{Kind: Instance, Name: "executor@during-effect"}, true, true},
		// Without its phase it is a (bad) server name.
		{"executor@", Target{Kind: Server, Name: "executor@"}, false, false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got := ParseTarget(tt.in)
			if got != tt.want {
				t.Fatalf("ParseTarget(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("String() = %q, want %q", s, tt.in)
			}
			if got.IsRole() != tt.role {
				t.Errorf("IsRole() = %v, want %v", got.IsRole(), tt.role)
			}
			if got.Lane() != tt.lane {
				t.Errorf("Lane() = %v, want %v", got.Lane(), tt.lane)
			}
		})
	}
}

// TestMadeTargets: the targets the runner makes when it resolves a role
// are the ones a scenario would write.
func TestMadeTargets(t *testing.T) {
	for _, tt := range []struct {
		made Target
		text string
	}{
		{InstanceTarget(3), "instance-3"},
		{ServerTarget("etcd-2"), "etcd-2"},
		{LinkTarget("redis-1", 0), "link:redis-1"},
		{LinkTarget("redis-1", 2), "link:redis-1@instance-2"},
		{ParseTarget("link:etcd-1@holder").Scoped(4), "link:etcd-1@instance-4"},
	} {
		if tt.made != ParseTarget(tt.text) || tt.made.String() != tt.text {
			t.Errorf("%+v: want %q parsed", tt.made, tt.text)
		}
	}
	if k, ok := ParseTarget("holder-of:k3").Key(); !ok || k != "k3" {
		t.Errorf("holder-of:k3's key: %q, %v", k, ok)
	}
	if _, ok := ParseTarget("holder").Key(); ok {
		t.Error("holder has a key")
	}
	if got := Targets([]Target{InstanceTarget(1), InstanceTarget(history.Instance(2))}); got != "instance-1,instance-2" {
		t.Errorf("Targets = %q", got)
	}
	if !ParseTarget("link:a@holder").ScopeRole() || ParseTarget("link:a@instance-1").ScopeRole() || ParseTarget("link:a@leader").ScopeRole() {
		t.Error("ScopeRole: only an instance role scopes")
	}
}

// FuzzTarget: whatever the string, parsing does not panic and the target
// prints back as it was written.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"redis-1", "link:a@instance-1", "link:", "link:@", "holder-of:", "instance-", "@x", "link:a@b@c", "connected-member@", "connected-member@@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := ParseTarget(s).String(); got != s {
			t.Errorf("ParseTarget(%q).String() = %q", s, got)
		}
	})
}

// TestPhase: the phase an executor role aims at; none for other targets.
func TestPhase(t *testing.T) {
	for _, tt := range []struct {
		in, phase string
		ok        bool
	}{{"executor", "", true}, {"executor@after-effect", "after-effect", true}, {"holder", "", false}, {"instance-2", "", false}, {"link:redis-1@executor", "", false}} {
		if phase, ok := ParseTarget(tt.in).Phase(); phase != tt.phase || ok != tt.ok {
			t.Errorf("%s: Phase() = %q, %v, want %q, %v", tt.in, phase, ok, tt.phase, tt.ok)
		}
	}
}
