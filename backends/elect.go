package backends

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leader election, the ability of the backends whose servers offer one:
// etcd's election API (concurrency.Election: Campaign, Observe, Resign),
// Consul's documented leader-election pattern (a session, then a KV
// acquire of the leader key with it; the others wait on the key with
// blocking queries) and ZooKeeper's election recipe (ephemeral sequential
// nodes: the lowest leads, each other watches the one before it — the
// lock recipe's very steps, so it runs that code). A term of leadership
// is a Lease: its token is greater than every earlier term's, and Lost
// closes when the client library learns the term is over (its session
// expired, another client's key leads). A client that was paused learns
// it only when it runs again: until then it believes it leads.

// Elector is implemented by Lockers that can campaign in a leader
// election on their servers.
type Elector interface {
	// Campaign waits until this client leads the election called name,
	// or ctx ends (an error), and returns its term.
	Campaign(ctx context.Context, name string) (Lease, error)
	// Resign ends a term (one already lost too: it cleans up).
	Resign(ctx context.Context, term Lease) error
}

// Electing is implemented by backends whose Lockers are Electors.
type Electing interface {
	Elects() bool
}

// Elects reports whether b's clients can campaign in a leader election.
func Elects(b Backend) bool {
	e, ok := b.(Electing)
	return ok && e.Elects()
}

func (b *etcdBackend) Elects() bool   { return true }
func (b *consulBackend) Elects() bool { return true }
func (b *zkBackend) Elects() bool     { return true }

// etcdTerm is a term won through etcd's election API: its token is the
// leader key's creation revision (Election.Rev), which increases with
// every campaign; it is lost when the session's lease ends or Observe
// shows another key leading.
type etcdTerm struct {
	name  string
	el    *concurrency.Election
	token uint64
	lost  chan struct{}
	stop  context.CancelFunc
}

func (t *etcdTerm) Key() string           { return t.name }
func (t *etcdTerm) Token() uint64         { return t.token }
func (t *etcdTerm) Lost() <-chan struct{} { return t.lost }

func (e *etcdLocker) Campaign(ctx context.Context, name string) (Lease, error) {
	sess, err := e.session(ctx)
	if err != nil {
		return nil, err
	}
	el := concurrency.NewElection(sess, "/lockbench/election/"+name)
	if err := el.Campaign(ctx, fmt.Sprintf("%x", sess.Lease())); err != nil {
		return nil, fmt.Errorf("etcd campaign %s: %w", name, err)
	}
	octx, stop := context.WithCancel(context.Background())
	t := &etcdTerm{name: name, el: el, token: uint64(el.Rev()), lost: make(chan struct{}), stop: stop}
	mine := el.Key()
	go func() {
		defer close(t.lost)
		obs := el.Observe(octx)
		for {
			select {
			case <-sess.Done():
				return
			case <-octx.Done():
				return
			case r, ok := <-obs:
				if !ok {
					obs = nil // Observe gave up (an error): the session still says
					continue
				}
				if len(r.Kvs) == 0 || string(r.Kvs[0].Key) != mine {
					return
				}
			}
		}
	}()
	return t, nil
}

func (e *etcdLocker) Resign(ctx context.Context, term Lease) error {
	t, ok := term.(*etcdTerm)
	if !ok {
		return fmt.Errorf("resign: term of type %T is not an etcd term", term)
	}
	defer t.stop()
	if err := t.el.Resign(ctx); err != nil {
		return fmt.Errorf("etcd resign %s: %w", t.name, err)
	}
	return nil
}

// consulTerm is a term won by acquiring the leader key with a session:
// its token is the key's ModifyIndex read right after (a Raft index); it
// is lost when the session's renewal fails or the key no longer names the
// session.
type consulTerm struct {
	name, kvKey, session string
	token                uint64
	lost                 chan struct{}
	once                 sync.Once
	renew                chan struct{} // closing it stops the renewal and destroys the session
}

func (t *consulTerm) Key() string           { return t.name }
func (t *consulTerm) Token() uint64         { return t.token }
func (t *consulTerm) Lost() <-chan struct{} { return t.lost }
func (t *consulTerm) end()                  { t.once.Do(func() { close(t.lost) }) }

func (c *consulLocker) Campaign(ctx context.Context, name string) (Lease, error) {
	kvKey := "lockbench/election/" + name
	id, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	t := &consulTerm{name: name, kvKey: kvKey, session: id, lost: make(chan struct{}), renew: make(chan struct{})}
	go func() {
		err := c.cl.Session().RenewPeriodic(c.opt.SessionTTL.D().String(), id, nil, t.renew)
		if err != nil {
			t.end() // the session is gone: so is the term
		}
	}()
	kv := c.cl.KV()
	var index uint64
	waitTime := c.opt.LockWaitTime.D()
	if waitTime == 0 {
		waitTime = api.DefaultLockWaitTime
	}
	for {
		ok, _, err := kv.Acquire(&api.KVPair{Key: kvKey, Value: []byte(id), Session: id}, (&api.WriteOptions{}).WithContext(ctx))
		if err == nil && ok {
			break
		}
		if ctx.Err() != nil {
			close(t.renew)
			return nil, fmt.Errorf("consul campaign %s: %w", name, ctx.Err())
		}
		// Wait until the key changes (its holder's session ended, or lock
		// delay passed), a blocking query bounded by the campaign's wait.
		pair, meta, err := kv.Get(kvKey, (&api.QueryOptions{WaitIndex: index, WaitTime: waitTime}).WithContext(ctx))
		if err == nil {
			index = meta.LastIndex
		}
		if err != nil || pair == nil || pair.Session == "" {
			// Unanswered, or free but still refused (the lock delay after
			// its last holder's session ended): ask again shortly.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	pair, meta, err := kv.Get(kvKey, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil || pair.Session != id {
		kv.Release(&api.KVPair{Key: kvKey, Session: id}, nil)
		close(t.renew)
		return nil, fmt.Errorf("consul campaign %s: read the term's token: %v", name, err)
	}
	t.token = pair.ModifyIndex
	go c.watchTerm(t, meta.LastIndex)
	return t, nil
}

// watchTerm ends t when the leader key no longer names its session.
func (c *consulLocker) watchTerm(t *consulTerm, index uint64) {
	for {
		select {
		case <-t.lost:
			return
		default:
		}
		pair, meta, err := c.cl.KV().Get(t.kvKey, &api.QueryOptions{WaitIndex: index, WaitTime: 5 * time.Second})
		if err != nil {
			select {
			case <-t.lost:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if pair == nil || pair.Session != t.session {
			t.end()
			return
		}
		index = meta.LastIndex
	}
}

func (c *consulLocker) Resign(ctx context.Context, term Lease) error {
	t, ok := term.(*consulTerm)
	if !ok {
		return fmt.Errorf("resign: term of type %T is not a consul term", term)
	}
	defer t.end()
	defer close(t.renew)
	_, _, err := c.cl.KV().Release(&api.KVPair{Key: t.kvKey, Session: t.session}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("consul resign %s: %w", t.name, err)
	}
	return nil
}

// Campaign: ZooKeeper's election recipe is its lock recipe (the lowest
// ephemeral sequential node leads; the others watch their predecessor),
// waiting however the backend's wait option says; the term's token is
// the node's czxid, and it is lost with the session (lost_on).
func (z *zkLocker) Campaign(ctx context.Context, name string) (Lease, error) {
	zl := *z
	zl.wait = "block"
	return zl.Acquire(ctx, "election-"+name)
}

func (z *zkLocker) Resign(ctx context.Context, term Lease) error {
	err := z.Release(ctx, term)
	if errors.Is(err, ErrNotHeld) {
		return nil // its node went with its session
	}
	return err
}

var (
	_ Elector = (*etcdLocker)(nil)
	_ Elector = (*consulLocker)(nil)
	_ Elector = (*zkLocker)(nil)
)
