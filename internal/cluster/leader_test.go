package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
)

// etcdMember serves /v3/maintenance/status as an etcd member would: its
// id, the leader it knows and that leader's term.
func etcdMember(t *testing.T, name, id, leader string, term int) *Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"header":{"member_id":%q},"leader":%q,"raftTerm":"%d"}`, id, leader, term)
	}))
	t.Cleanup(srv.Close)
	return &Server{Spec: backends.ServerSpec{Name: name, Kind: "etcd"}, Addr: strings.TrimPrefix(srv.URL, "http://")}
}

// stoppedMember accepts connections and never answers, as a member
// stopped by SIGSTOP does (the kernel completes the handshake).
func stoppedMember(t *testing.T, name string) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &Server{Spec: backends.ServerSpec{Name: name, Kind: "etcd"}, Addr: l.Addr().String()}
}

// TestLeaderWithAMemberStopped: a stopped member, asked first, neither
// hides the leader the others name nor makes the answer wait past one
// member's timeout; of two leaders named, the one of the higher term is
// the leader (a member just resumed still names the old one).
func TestLeaderWithAMemberStopped(t *testing.T) {
	old := stoppedMember(t, "etcd-1") // the old leader, paused
	b := etcdMember(t, "etcd-2", "b", "c", 3)
	c := etcdMember(t, "etcd-3", "c", "c", 3)
	start := time.Now()
	// A deadline for the question: the answering members' answers come
	// within it however busy the machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := etcdLeader(ctx, []*Server{old, b, c})
	if err != nil || got != "etcd-3" {
		t.Errorf("leader %q, %v; want etcd-3", got, err)
	}
	// What this guards against is a stopped member holding the answer
	// past the question's deadline (an HTTP client with no timeout waits
	// as long as the member is stopped, here for good): the bound leaves
	// a busy machine 25 s past the deadline.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s: the stopped member held the others up", d)
	}

	resumed := etcdMember(t, "etcd-1", "a", "a", 2) // resumed, still naming itself
	if got, err := etcdLeader(context.Background(), []*Server{resumed, b, c}); err != nil || got != "etcd-3" {
		t.Errorf("leader %q, %v; want etcd-3, named in the higher term", got, err)
	}
	if got, err := etcdLeader(context.Background(), []*Server{old}); err == nil {
		t.Errorf("a lone stopped member gave a leader: %q", got)
	}
}

// TestMostNamed: the name most members give, the first on a tie, and
// failed answers count for nothing.
func TestMostNamed(t *testing.T) {
	a := func(v string, err error) memberAnswer[string] { return memberAnswer[string]{v: v, err: err} }
	for _, tt := range []struct {
		in   []memberAnswer[string]
		want string
	}{
		{[]memberAnswer[string]{a("x", nil), a("y", nil), a("y", nil)}, "y"},
		{[]memberAnswer[string]{a("x", nil), a("y", nil)}, "x"},
		{[]memberAnswer[string]{a("", fmt.Errorf("down")), a("", fmt.Errorf("down")), a("z", nil)}, "z"},
		{[]memberAnswer[string]{a("", fmt.Errorf("down"))}, ""},
	} {
		if got := mostNamed(tt.in); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.in, got, tt.want)
		}
	}
}
