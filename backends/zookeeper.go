package backends

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockbench/lockbench/internal/config"
)

// zookeeper is the standard ZooKeeper lock recipe on
// github.com/go-zookeeper/zk, written out here because the library's Lock
// has no try-lock, no session-loss signal and no token: a protected
// ephemeral sequential node under the lock's path; the lowest sequence
// holds the lock; others watch their predecessor. The lease is the session:
// it is lost when the session expires (the client learns it only when it
// reconnects). The fencing token is the node's czxid, the zxid of its
// creation, which increases in the order holders queued.
func init() {
	Register(Info{Name: "zookeeper", Summary: "ZooKeeper ephemeral-sequential lock recipe (go-zookeeper); token = czxid", New: newZooKeeper})
}

// ZooKeeperOptions configure the zookeeper backend.
type ZooKeeperOptions struct {
	Members int `yaml:"members"` // ensemble size (default 3)
	// SessionTimeout asked by the client (default: the workload's ttl); the
	// server bounds it to [2, 20]×tick_time unless min/max are set.
	SessionTimeout config.Duration `yaml:"session_timeout"`
	// TickTime of the servers (default 500ms here; ZooKeeper's is 2s).
	TickTime config.Duration `yaml:"tick_time"`
	// Wait is block (watch the predecessor, default) or try.
	Wait string `yaml:"wait"`
}

type zkBackend struct{ opt ZooKeeperOptions }

func newZooKeeper(decode Decoder) (Backend, error) {
	var o ZooKeeperOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := count("members", &o.Members, 3, 7); err != nil {
		return nil, err
	}
	if o.TickTime == 0 {
		o.TickTime = config.Duration(500 * time.Millisecond)
	}
	if o.TickTime < config.Duration(10*time.Millisecond) {
		return nil, fmt.Errorf("tick_time: %s is too short", o.TickTime)
	}
	if o.SessionTimeout < 0 {
		return nil, errors.New("session_timeout: must not be negative")
	}
	if st := o.SessionTimeout.D(); st > 0 && (st < 2*o.TickTime.D() || st > 20*o.TickTime.D()) {
		return nil, fmt.Errorf("session_timeout: %s is outside the server's range [2, 20]×tick_time = [%s, %s]", st, 2*o.TickTime.D(), 20*o.TickTime.D())
	}
	if err := oneOf("wait", &o.Wait, "block", "try"); err != nil {
		return nil, err
	}
	return &zkBackend{opt: o}, nil
}

func (b *zkBackend) Servers() []ServerSpec {
	set := map[string]string{"tickTime": fmt.Sprint(b.opt.TickTime.D().Milliseconds())}
	var out []ServerSpec
	for i := 1; i <= b.opt.Members; i++ {
		out = append(out, ServerSpec{Kind: "zookeeper", Name: fmt.Sprintf("zookeeper-%d", i), Settings: set})
	}
	return out
}

func (b *zkBackend) Fenced() bool { return true }

// zkSession tracks the sessions of one connection: each session is an
// epoch whose channel closes when it expires.
type zkSession struct {
	conn *zk.Conn
	mu   sync.Mutex
	done chan struct{}
}

func (s *zkSession) epoch() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *zkSession) watch(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type == zk.EventSession && ev.State == zk.StateExpired {
			s.mu.Lock()
			close(s.done)
			s.done = make(chan struct{})
			s.mu.Unlock()
		}
	}
}

func (b *zkBackend) Open(ctx context.Context, env Env) (Locker, error) {
	timeout := b.opt.SessionTimeout.D()
	if timeout == 0 {
		timeout = env.TTL
	}
	// One session per application instance, as Curator users have.
	v, err := env.Shared.Get("zk", func() (any, func() error, error) {
		var servers []string
		for i := 1; i <= b.opt.Members; i++ {
			name := fmt.Sprintf("zookeeper-%d", i)
			addr, ok := env.Endpoints[name]
			if !ok {
				return nil, nil, fmt.Errorf("no endpoint for %s", name)
			}
			servers = append(servers, addr)
		}
		// The library logs to stdout by default, which is the worker's
		// event stream: send its log to stderr.
		dial := env.Dialer()
		conn, events, err := zk.Connect(servers, timeout, zk.WithLogger(log.New(os.Stderr, "zk ", log.Lmicroseconds)),
			zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				return dial(ctx, network, address)
			}))
		if err != nil {
			return nil, nil, fmt.Errorf("connect to zookeeper %v: %w", servers, err)
		}
		s := &zkSession{conn: conn, done: make(chan struct{})}
		go s.watch(events)
		if err := ensurePath(conn, "/lockbench"); err != nil {
			conn.Close()
			return nil, nil, err
		}
		return s, func() error { conn.Close(); return nil }, nil
	})
	if err != nil {
		return nil, err
	}
	return &zkLocker{s: v.(*zkSession), wait: b.opt.Wait}, nil
}

func ensurePath(conn *zk.Conn, p string) error {
	_, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

type zkLocker struct {
	s    *zkSession
	wait string
}

type zkLease struct {
	key, node string
	token     uint64
	lost      chan struct{}
}

func (l *zkLease) Key() string           { return l.key }
func (l *zkLease) Token() uint64         { return l.token }
func (l *zkLease) Lost() <-chan struct{} { return l.lost }

// seqOf returns the sequence suffix of a sequential node name.
func seqOf(name string) string {
	if i := strings.LastIndex(name, "lock-"); i >= 0 {
		return name[i+len("lock-"):]
	}
	return name
}

func (z *zkLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	conn := z.s.conn
	base := "/lockbench/" + key
	if err := ensurePath(conn, base); err != nil {
		return nil, err
	}
	epoch := z.s.epoch()
	node, err := conn.CreateProtectedEphemeralSequential(base+"/lock-", nil, zk.WorldACL(zk.PermAll))
	if err != nil {
		return nil, fmt.Errorf("zookeeper create under %s: %w", base, err)
	}
	mine := node[strings.LastIndexByte(node, '/')+1:]
	giveUp := func(reason error) (Lease, error) {
		if err := conn.Delete(node, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("zookeeper: %v, and removing %s failed: %w", reason, node, err)
		}
		return nil, reason
	}
	for {
		children, _, err := conn.Children(base)
		if err != nil {
			return nil, fmt.Errorf("zookeeper children of %s: %w", base, err)
		}
		sort.Slice(children, func(i, j int) bool { return seqOf(children[i]) < seqOf(children[j]) })
		idx := sort.SearchStrings(mapSeq(children), seqOf(mine))
		if idx >= len(children) || children[idx] != mine {
			// Our node is gone: the session expired while we queued.
			return nil, fmt.Errorf("zookeeper: %s vanished while waiting (session expired)", node)
		}
		if idx == 0 {
			_, st, err := conn.Exists(node)
			if err != nil || st == nil {
				return nil, fmt.Errorf("zookeeper stat %s: %v", node, err)
			}
			return &zkLease{key: key, node: node, token: uint64(st.Czxid), lost: epoch}, nil
		}
		if z.wait == "try" {
			return giveUp(ErrNotAcquired)
		}
		exists, _, ch, err := conn.ExistsW(base + "/" + children[idx-1])
		if err != nil {
			return nil, fmt.Errorf("zookeeper watch predecessor: %w", err)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return giveUp(ErrNotAcquired)
		}
	}
}

func mapSeq(children []string) []string {
	out := make([]string, len(children))
	for i, c := range children {
		out[i] = seqOf(c)
	}
	return out
}

func (z *zkLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*zkLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not a zookeeper lease", lease)
	}
	if err := z.s.conn.Delete(l.node, -1); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return ErrNotHeld
		}
		return fmt.Errorf("zookeeper release %s: %w", l.key, err)
	}
	return nil
}

func (z *zkLocker) Close() error { return nil }
