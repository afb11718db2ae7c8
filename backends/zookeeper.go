package backends

import (
	"context"
	"crypto/rand"
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
	"github.com/lockbench/lockbench/internal/wait"
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
	Register(Info{Name: "zookeeper",
		Doc: Doc{
			Servers: "3 ZooKeeper 3.8 members",
			Models:  "the standard recipe on go-zookeeper/zk v1.0.4: protected ephemeral sequential node, lowest holds, others watch their predecessor; one session per instance",
			Token:   "the node's czxid",
			Lost:    "session expiry",
			Options: "`members` (3), `session_timeout` (workload ttl; within 2–20 × tick), `tick_time` (500ms), `wait` (block; try), `lost_on` (expired: when ZooKeeper says so, learnt on reconnect; disconnected: as soon as the connection drops, as Curator advises), `create` (protected: the node's name carries a guid, looked for after a create whose reply was lost; plain: created again, as recipes without the guid did, leaving an orphan node ahead of everyone while the session lives: samuel/go-zookeeper #229). The recipe retries through a lost member (the session moves to another) and never strands its node: a create whose reply was lost is found by its protected prefix, and a node it could not delete is deleted by a reaper as soon as the connection allows"},
		Paused:  Paused{Shows: PauseLost, For: 4 * time.Second},
		Summary: "ZooKeeper ephemeral-sequential lock recipe (go-zookeeper); token = czxid", Options: ZooKeeperOptions{}, New: newZooKeeper, Drivers: true})
}

// ZooKeeperOptions configure the zookeeper backend.
type ZooKeeperOptions struct {
	Members int `yaml:"members" doc:"ensemble size (default 3)"` // ensemble size (default 3)
	// SessionTimeout asked by the client (default: the workload's ttl); the
	// server bounds it to [2, 20]×tick_time unless min/max are set.
	SessionTimeout config.Duration `yaml:"session_timeout" doc:"session timeout the client asks for (default: the workload ttl; bounded to 2-20 ticks)"`
	// TickTime of the servers (default 500ms here; ZooKeeper's is 2s).
	TickTime config.Duration `yaml:"tick_time" doc:"server tick time (default 500ms; ZooKeeper's own is 2s)"`
	// Wait is block (watch the predecessor, default) or try.
	Wait string `yaml:"wait" doc:"block (watch the predecessor, default) or try"`
	// LostOn says when the client gives its lease up: expired (default:
	// when ZooKeeper says the session expired, which the client learns
	// only once it reconnects) or disconnected (as soon as the connection
	// drops, as Curator's SUSPENDED handling advises).
	LostOn string `yaml:"lost_on" doc:"when a client gives its lease up: expired (default) or disconnected"`
	// ForceSync: false runs the members with forceSync=no, acknowledging
	// transactions their log never fsynced (what a power-loss fault takes).
	ForceSync *bool `yaml:"force_sync" doc:"fsync the transaction log before acknowledging (default true; false: forceSync=no)"`
	// Create is how the recipe makes its node: protected (default: a
	// unique prefix in the name, looked for after a create whose reply was
	// lost, as the ZooKeeper recipe's error-handling note and Curator's
	// protection do) or plain (create again, as recipes without the guid
	// did: samuel/go-zookeeper #229, Curator's first LockInternals,
	// zk-ruby #54). A plain create whose reply was lost leaves a node
	// nobody knows, ahead of every later one, for as long as the session
	// lives.
	Create string `yaml:"create" doc:"how the recipe creates its node: protected (default: a unique prefix, found again after a lost reply) or plain (created again: a lost reply leaves an orphan node ahead of everyone while the session lives)"`
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
	if err := oneOf("lost_on", &o.LostOn, "expired", "disconnected"); err != nil {
		return nil, err
	}
	if err := oneOf("create", &o.Create, "protected", "plain"); err != nil {
		return nil, err
	}
	return &zkBackend{opt: o}, nil
}

func (b *zkBackend) Servers() []ServerSpec {
	set := map[string]string{"tickTime": fmt.Sprint(b.opt.TickTime.D().Milliseconds())}
	if b.opt.ForceSync != nil && !*b.opt.ForceSync {
		set["forceSync"] = "no"
	}
	var out []ServerSpec
	for i := 1; i <= b.opt.Members; i++ {
		out = append(out, ServerSpec{Kind: "zookeeper", Name: fmt.Sprintf("zookeeper-%d", i), Settings: set})
	}
	return out
}

func (b *zkBackend) Fenced() bool { return true }

// OneMember: an instance's clients share one session, on one member.
func (b *zkBackend) OneMember() bool { return true }

// zkSession tracks the session of one connection. done closes when the
// session expires (a new channel serves the next session); down closes
// when the connection is lost (the client cannot tell yet whether the
// session will survive). Nodes the recipe could not delete (the connection
// broke while it gave up) are orphans: left alone they would sit in the
// queue, ahead of every later client, for as long as the session lives, so
// a reaper deletes them as soon as the connection allows.
type zkSession struct {
	conn *zk.Conn
	mu   sync.Mutex
	done chan struct{}
	down chan struct{}

	orphans map[string]string // node path, or base+"/"+guid prefix when the name is unknown -> why
	reaping bool
	closed  chan struct{}
}

func (s *zkSession) epoch(onDisconnect bool) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if onDisconnect {
		return s.down
	}
	return s.done
}

func (s *zkSession) watch(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		s.mu.Lock()
		switch ev.State {
		case zk.StateExpired:
			close(s.done)
			s.done = make(chan struct{})
			select {
			case <-s.down:
			default:
				close(s.down)
			}
		case zk.StateDisconnected:
			select {
			case <-s.down:
			default:
				close(s.down)
			}
		case zk.StateHasSession:
			select {
			case <-s.down:
				s.down = make(chan struct{})
			default:
			}
		}
		s.mu.Unlock()
	}
}

// orphan hands a node to the reaper; prefix marks a node known only by
// its protected prefix (its create's reply was lost).
func (s *zkSession) orphan(path string, prefix bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orphans == nil {
		s.orphans = map[string]string{}
	}
	kind := "node"
	if prefix {
		kind = "prefix"
	}
	s.orphans[path] = kind
	if !s.reaping {
		s.reaping = true
		go s.reap()
	}
}

// reap deletes orphans until none is left or the connection is closed.
func (s *zkSession) reap() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
		}
		s.mu.Lock()
		todo := make(map[string]string, len(s.orphans))
		for k, v := range s.orphans {
			todo[k] = v
		}
		s.mu.Unlock()
		for path, kind := range todo {
			if s.remove(path, kind == "prefix") {
				s.mu.Lock()
				delete(s.orphans, path)
				s.mu.Unlock()
			}
		}
		s.mu.Lock()
		if len(s.orphans) == 0 {
			s.reaping = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// remove deletes one orphan; it reports whether it is gone.
func (s *zkSession) remove(path string, prefix bool) bool {
	if !prefix {
		err := s.conn.Delete(path, -1)
		return err == nil || errors.Is(err, zk.ErrNoNode)
	}
	dir, want := path[:strings.LastIndexByte(path, '/')], path[strings.LastIndexByte(path, '/')+1:]
	children, _, err := s.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return true
	}
	if err != nil {
		return false
	}
	for _, c := range children {
		if strings.HasPrefix(c, want) {
			if err := s.conn.Delete(dir+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return false
			}
		}
	}
	return true
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
		if creds := env.Credentials("zookeeper"); creds.Username() != "" {
			if err := conn.AddAuth("digest", []byte(creds.Username()+":"+creds.Password())); err != nil {
				conn.Close()
				return nil, nil, fmt.Errorf("zookeeper digest auth: %w", err)
			}
		}
		s := &zkSession{conn: conn, done: make(chan struct{}), down: make(chan struct{}), closed: make(chan struct{})}
		go s.watch(events)
		if err := retryZK(ctx, func() error { return ensurePath(conn, "/lockbench") }); err != nil {
			conn.Close()
			return nil, nil, err
		}
		return s, func() error { close(s.closed); conn.Close(); return nil }, nil
	})
	if err != nil {
		return nil, err
	}
	return &zkLocker{s: v.(*zkSession), wait: b.opt.Wait, onDisconnect: b.opt.LostOn == "disconnected", plain: b.opt.Create == "plain"}, nil
}

func ensurePath(conn *zk.Conn, p string) error {
	_, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// transientZK reports whether a ZooKeeper call failed because the
// connection broke: the session may well survive (the client reconnects to
// another member), so the recipe retries rather than giving up.
func transientZK(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved)
}

// retryZK calls f until it succeeds, fails for good, or ctx ends.
func retryZK(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || !transientZK(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type zkLocker struct {
	s            *zkSession
	wait         string
	onDisconnect bool
	plain        bool // create: plain (no prefix, created again after a lost reply)
}

type zkLease struct {
	key, node string
	token     uint64
	owner     int64 // the session the ephemeral node belongs to
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

// create makes the client's protected ephemeral sequential node, retrying
// through connection loss; the key's parent node is made only when the
// create says it is missing (the first acquisition of a key), so that the
// create is each acquisition's first request. A create whose reply was lost may have happened:
// before creating again, the node is looked for by its unique prefix (as
// Curator's protection does), so a client never leaves a twin of its node
// in the queue, where it would block every later client for as long as the
// session lives.
func (z *zkLocker) create(ctx context.Context, base string) (string, error) {
	if z.plain {
		return z.createPlain(ctx, base)
	}
	var g [16]byte
	if _, err := rand.Read(g[:]); err != nil {
		return "", err
	}
	prefix := fmt.Sprintf("_c_%x-", g)
	uncertain := false
	var last error
	for {
		if ctx.Err() != nil {
			if uncertain {
				z.s.orphan(base+"/"+prefix, true) // the reaper finds it, if it exists
			}
			return "", fmt.Errorf("zookeeper create under %s: %v (gave up: %v)", base, last, ctx.Err())
		}
		if uncertain {
			children, _, err := z.s.conn.Children(base)
			if err != nil {
				last = err
				if !transientZK(err) {
					z.s.orphan(base+"/"+prefix, true)
					return "", fmt.Errorf("zookeeper children of %s: %w", base, err)
				}
				wait.Sleep(ctx, 20*time.Millisecond)
				continue
			}
			for _, c := range children {
				if strings.HasPrefix(c, prefix) {
					return base + "/" + c, nil
				}
			}
			uncertain = false
		}
		node, again, err := z.createIn(ctx, base, prefix+"lock-")
		switch {
		case again:
			continue
		case err == nil:
			return node, nil
		case errors.Is(err, zk.ErrConnectionClosed):
			uncertain = true // sent, maybe done, reply lost
		case !transientZK(err) && !errors.Is(err, zk.ErrSessionExpired):
			return "", fmt.Errorf("zookeeper create under %s: %w", base, err)
		}
		last = err
		wait.Sleep(ctx, 20*time.Millisecond)
	}
}

// createIn creates an ephemeral sequential node name under base. When
// base is missing (the key's first acquisition) it makes it and says to
// try again; an error making it is returned as is.
func (z *zkLocker) createIn(ctx context.Context, base, name string) (node string, again bool, err error) {
	node, err = z.s.conn.Create(base+"/"+name, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) {
		if err := retryZK(ctx, func() error { return ensurePath(z.s.conn, base) }); err != nil {
			return "", false, err
		}
		return "", true, nil
	}
	return node, false, err
}

// createPlain is the recipe without protection: a create whose reply was
// lost is simply made again, and the first node, if the server made it,
// stays in the queue unknown to anyone (the create: plain option).
func (z *zkLocker) createPlain(ctx context.Context, base string) (string, error) {
	for {
		node, again, err := z.createIn(ctx, base, "lock-")
		switch {
		case again:
			continue
		case err == nil:
			return node, nil
		case !transientZK(err) && !errors.Is(err, zk.ErrSessionExpired):
			return "", fmt.Errorf("zookeeper create under %s: %w", base, err)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("zookeeper create under %s: %v (gave up: %v)", base, err, ctx.Err())
		}
		wait.Sleep(ctx, 20*time.Millisecond)
	}
}

func (z *zkLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	conn := z.s.conn
	base := "/lockbench/" + key
	epoch := z.s.epoch(z.onDisconnect)
	node, err := z.create(ctx, base)
	if err != nil {
		return nil, err
	}
	mine := node[strings.LastIndexByte(node, '/')+1:]
	// giveUp removes the node; if the connection does not allow it now,
	// the reaper does, and the outcome is unknown meanwhile (the node may
	// reach the head of the queue before it is deleted).
	giveUp := func(reason error) (Lease, error) {
		err := conn.Delete(node, -1)
		switch {
		case err == nil || errors.Is(err, zk.ErrNoNode):
			return nil, reason
		default:
			z.s.orphan(node, false)
			return nil, fmt.Errorf("zookeeper: %v, and removing %s failed (%v): left to the reaper", reason, node, err)
		}
	}
	retry := func(err error) bool {
		if !transientZK(err) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
			return true
		}
	}
	for {
		children, _, err := conn.Children(base)
		if err != nil {
			if retry(err) {
				continue
			}
			return giveUp(fmt.Errorf("zookeeper children of %s: %w", base, err))
		}
		sort.Slice(children, func(i, j int) bool { return seqOf(children[i]) < seqOf(children[j]) })
		idx := sort.SearchStrings(mapSeq(children), seqOf(mine))
		if idx >= len(children) || children[idx] != mine {
			// Our node is gone: the session expired while we queued.
			return nil, fmt.Errorf("zookeeper: %s vanished while waiting (session expired)", node)
		}
		if idx == 0 {
			_, st, err := conn.Exists(node)
			if err != nil && retry(err) {
				continue
			}
			if err != nil || st == nil {
				return giveUp(fmt.Errorf("zookeeper stat %s: %v", node, err))
			}
			return &zkLease{key: key, node: node, token: uint64(st.Czxid), owner: st.EphemeralOwner, lost: epoch}, nil
		}
		if z.wait == "try" {
			return giveUp(ErrNotAcquired)
		}
		exists, _, ch, err := conn.ExistsW(base + "/" + children[idx-1])
		if err != nil {
			if retry(err) {
				continue
			}
			return giveUp(fmt.Errorf("zookeeper watch predecessor: %w", err))
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
	retried := false
	err := retryZK(ctx, func() error {
		err := z.s.conn.Delete(l.node, -1)
		if errors.Is(err, zk.ErrNoNode) && retried && z.s.conn.SessionID() == l.owner {
			return nil // the first attempt did it; its reply was lost
		}
		retried = retried || errors.Is(err, zk.ErrConnectionClosed)
		return err
	})
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return ErrNotHeld
		}
		z.s.orphan(l.node, false) // it must not hold the lock for the rest of the session
		return fmt.Errorf("zookeeper release %s: %w", l.key, err)
	}
	return nil
}

func (z *zkLocker) Close() error { return nil }

// Release: a node that is gone when its session is not the one that
// created it died with that session (it expired while the client was away,
// and the library opened a new one), so the release is refused as not held
// even after a retry; only in the same session can a missing node be the
// first attempt's work whose reply was lost.

// LeaseTime: the session timeout (the ephemeral node lives as long as the
// session).
func (b *zkBackend) LeaseTime(ttl time.Duration) time.Duration {
	if b.opt.SessionTimeout > 0 {
		return b.opt.SessionTimeout.D()
	}
	return ttl
}

// RenewsInBackground: the session is kept alive by the library, unseen.
func (b *zkBackend) RenewsInBackground() bool { return true }

// Cycle: the client pings its session every third of its timeout.
func (b *zkBackend) Cycle(ttl time.Duration) time.Duration { return b.LeaseTime(ttl) / 3 }
