package faults

import "testing"

// TestParseTarget: every form of the grammar in Target's doc comment.
func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		in       string
		want     Target
		role     bool
		instance int
		lane     bool
	}{
		{"redis-1", Target{Kind: Server, Name: "redis-1"}, false, 0, false},
		{"leader", Target{Kind: Server, Name: "leader"}, true, 0, false},
		{"master", Target{Kind: Server, Name: "master"}, true, 0, false},
		{"instance-2", Target{Kind: Instance, Name: "instance-2"}, false, 2, true},
		{"holder", Target{Kind: Instance, Name: "holder"}, true, 0, true},
		{"a-waiter", Target{Kind: Instance, Name: "a-waiter"}, true, 0, true},
		{"holder-of:k3", Target{Kind: Instance, Name: "holder-of:k3"}, true, 0, true},
		{"link:redis-1", Target{Kind: Link, Name: "redis-1"}, false, 0, false},
		{"link:etcd-1-peer", Target{Kind: Link, Name: "etcd-1-peer"}, false, 0, false},
		{"link:resource@instance-3", Target{Kind: Link, Name: "resource", Scope: "instance-3"}, false, 3, true},
		{"link:etcd-2@holder", Target{Kind: Link, Name: "etcd-2", Scope: "holder"}, true, 0, true},
		// A link scoped to a server role is no lane's and no instance's.
		{"link:etcd-2@leader", Target{Kind: Link, Name: "etcd-2", Scope: "leader"}, true, 0, false},
		// A connected member is a server, resolved at injection; it acts
		// on a server every side-by-side trial shares: no lane's.
		{"connected-member@instance-2", Target{Kind: Server, Name: "connected-member", Scope: "instance-2"}, true, 0, false},
		{"connected-member@holder", Target{Kind: Server, Name: "connected-member", Scope: "holder"}, true, 0, false},
		// A server name with an @ is a (bad) name, for validation.
		{"redis-1@instance-2", Target{Kind: Server, Name: "redis-1@instance-2"}, false, 0, false},
		// instance-02 is not instance-2: the name must round-trip.
		{"instance-02", Target{Kind: Instance, Name: "instance-02"}, false, 0, true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got := ParseTarget(tt.in)
			if got != tt.want {
				t.Fatalf("ParseTarget(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("String() = %q, want %q", s, tt.in)
			}
			if got.Role() != tt.role {
				t.Errorf("Role() = %v, want %v", got.Role(), tt.role)
			}
			if n, ok := got.Instance(); n != tt.instance || ok != (tt.instance > 0) {
				t.Errorf("Instance() = %d, %v, want %d", n, ok, tt.instance)
			}
			if got.Lane() != tt.lane {
				t.Errorf("Lane() = %v, want %v", got.Lane(), tt.lane)
			}
			if KindOf(tt.in) != tt.want.Kind {
				t.Errorf("KindOf = %v, want %v", KindOf(tt.in), tt.want.Kind)
			}
		})
	}
}

// FuzzTarget: whatever the string, parsing does not panic and the target
// prints back as it was written.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"redis-1", "link:a@instance-1", "link:", "link:@", "holder-of:", "instance-", "@x", "link:a@b@c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := ParseTarget(s).String(); got != s {
			t.Errorf("ParseTarget(%q).String() = %q", s, got)
		}
	})
}
