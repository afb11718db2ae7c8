package backends

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/config"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// etcd is a lock on an etcd cluster through the official client's
// concurrency package: a Session (a lease kept alive by the client every
// TTL/3) and a Mutex on a key prefix. The lease is lost when Session.Done()
// closes (the keep-alive stopped getting answers for a TTL). The fencing
// token is the revision at which the mutex was acquired
// (Mutex.Header().Revision), which increases across successive holders.
func init() {
	Register(Info{Name: "etcd",
		Doc: Doc{
			Servers: "3 etcd 3.6.16 members",
			Models:  "go.etcd.io/etcd/client/v3 `concurrency.Session` (lease kept alive every TTL/3) + `Mutex`",
			Token:   "the revision at which the mutex was acquired",
			Lost:    "`Session.Done()`",
			Options: "`members` (3), `session_ttl` (workload ttl, rounded up to seconds; the library's default is 60s), `wait` (block: `Lock`; try: `TryLock`), `heartbeat_interval` (100ms), `election_timeout` (1000ms), `dial_timeout` (5s), `balancer` (round-robin, the library's: a connection to every member; pick-first: one member at a time, instance N starting from member N, which the `connected-member` role needs)"},
		Paused:  Paused{Shows: PauseLost, For: 4 * time.Second},
		Summary: "etcd v3 concurrency.Mutex over a session lease; token = acquisition revision", Options: EtcdOptions{}, New: newEtcd, Drivers: true})
}

// EtcdOptions configure the etcd backend.
type EtcdOptions struct {
	// Members of the cluster (default 3).
	Members int `yaml:"members" doc:"cluster members (default 3)"`
	// SessionTTL of the lease (default: the workload's ttl rounded up to
	// whole seconds; the library's own default is 60s; the server raises
	// anything below its minimum, 2s with default timings).
	SessionTTL config.Duration `yaml:"session_ttl" doc:"session lease TTL (default: the workload ttl rounded up to seconds; server minimum 2s)"`
	// Wait is block (Mutex.Lock, default) or try (Mutex.TryLock, with the
	// client's backoff between attempts).
	Wait string `yaml:"wait" doc:"block (Mutex.Lock, default) or try (Mutex.TryLock with backoff)"`
	// Server timings in ms (etcd defaults: 100 and 1000).
	HeartbeatInterval int `yaml:"heartbeat_interval" doc:"server heartbeat in ms (default 100)"`
	ElectionTimeout   int `yaml:"election_timeout" doc:"server election timeout in ms (default 1000)"`
	// UnsafeNoFsync runs the members with --unsafe-no-fsync: they
	// acknowledge writes they never fsync (what a power-loss fault takes).
	UnsafeNoFsync bool `yaml:"unsafe_no_fsync" doc:"run the members with --unsafe-no-fsync: writes acknowledged, never fsynced (default false)"`
	// Balancer is how the client spreads its requests: round-robin (the
	// library's: a connection to every member, requests rotated) or
	// pick-first (one connection, to the first member that answers in an
	// order rotated by instance, moving on when it fails: what the
	// connected-member role needs).
	Balancer string `yaml:"balancer" doc:"round-robin (the library's: every member, requests rotated; default) or pick-first (one member at a time, in an order rotated per instance)"`
	// DialTimeout of the client (default 5s).
	DialTimeout config.Duration `yaml:"dial_timeout" doc:"client dial timeout (default 5s)"`
}

type etcdBackend struct{ opt EtcdOptions }

func newEtcd(decode Decoder) (Backend, error) {
	var o EtcdOptions
	if err := decode(&o); err != nil {
		return nil, err
	}
	if err := count("members", &o.Members, 3, 7); err != nil {
		return nil, err
	}
	if err := oneOf("wait", &o.Wait, "block", "try"); err != nil {
		return nil, err
	}
	if err := oneOf("balancer", &o.Balancer, "round-robin", "pick-first"); err != nil {
		return nil, err
	}
	if o.SessionTTL < 0 || o.HeartbeatInterval < 0 || o.ElectionTimeout < 0 {
		return nil, errors.New("session_ttl, heartbeat_interval and election_timeout must not be negative")
	}
	if o.HeartbeatInterval > 0 && o.ElectionTimeout > 0 && o.ElectionTimeout < 5*o.HeartbeatInterval {
		return nil, fmt.Errorf("election_timeout: %dms must be at least 5×heartbeat_interval (%dms), as etcd requires", o.ElectionTimeout, o.HeartbeatInterval)
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = config.Duration(5 * time.Second)
	}
	return &etcdBackend{opt: o}, nil
}

func (b *etcdBackend) Servers() []ServerSpec {
	set := map[string]string{}
	if b.opt.HeartbeatInterval > 0 {
		set["heartbeat-interval"] = fmt.Sprint(b.opt.HeartbeatInterval)
	}
	if b.opt.ElectionTimeout > 0 {
		set["election-timeout"] = fmt.Sprint(b.opt.ElectionTimeout)
	}
	if b.opt.UnsafeNoFsync {
		set["unsafe-no-fsync"] = "true"
	}
	var out []ServerSpec
	for i := 1; i <= b.opt.Members; i++ {
		out = append(out, ServerSpec{Kind: "etcd", Name: fmt.Sprintf("etcd-%d", i), Settings: set})
	}
	return out
}

func (b *etcdBackend) Fenced() bool { return true }

// OneMember: with balancer: pick-first the instance's client keeps one
// connection, to one member.
func (b *etcdBackend) OneMember() bool { return b.opt.Balancer == "pick-first" }

// ttlSeconds is the session TTL in whole seconds, never below 1.
func (b *etcdBackend) ttlSeconds(workloadTTL time.Duration) int {
	d := b.opt.SessionTTL.D()
	if d == 0 {
		d = workloadTTL
	}
	return max(1, int(math.Ceil(d.Seconds())))
}

func (b *etcdBackend) Open(ctx context.Context, env Env) (Locker, error) {
	v, err := env.Shared.Get("etcd", func() (any, func() error, error) {
		cli, err := b.client(env)
		if err != nil {
			return nil, nil, err
		}
		return cli, cli.Close, nil
	})
	if err != nil {
		return nil, err
	}
	return &etcdLocker{cli: v.(*clientv3.Client), ttl: b.ttlSeconds(env.TTL), wait: b.opt.Wait}, nil
}

// client is a client of every member, through env's dialer.
func (b *etcdBackend) client(env Env) (*clientv3.Client, error) {
	var eps []string
	for i := 1; i <= b.opt.Members; i++ {
		name := fmt.Sprintf("etcd-%d", i)
		addr, ok := env.Endpoints[name]
		if !ok {
			return nil, fmt.Errorf("no endpoint for %s", name)
		}
		eps = append(eps, addr)
	}
	creds := env.Credentials("etcd")
	tlsCfg, err := creds.TLSConfig()
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	for i := range eps {
		eps[i] = scheme + eps[i]
	}
	dial := env.Dialer()
	opts := []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dial(ctx, "tcp", addr)
	})}
	if b.opt.Balancer == "pick-first" {
		// The client's resolver asks for round_robin in its service
		// config; ignoring it leaves gRPC's default, pick_first. Each
		// instance starts from another member.
		if env.Instance > 0 {
			r := (env.Instance - 1) % len(eps)
			eps = slices.Concat(eps[r:], eps[:r])
		}
		opts = append(opts, grpc.WithDisableServiceConfig())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: b.opt.DialTimeout.D(), Logger: zap.NewNop(),
		Username: creds.Username(), Password: creds.Password(), TLS: tlsCfg, DialOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(eps, ","), err)
	}
	return cli, nil
}

// etcdLocker is one client with its own session: two clients sharing a
// session would share the mutex key and both believe they hold the lock.
type etcdLocker struct {
	cli  *clientv3.Client
	ttl  int
	wait string
	sess *concurrency.Session
}

type etcdLease struct {
	key   string
	m     *concurrency.Mutex
	sess  *concurrency.Session
	token uint64
}

func (l *etcdLease) Key() string           { return l.key }
func (l *etcdLease) Token() uint64         { return l.token }
func (l *etcdLease) Lost() <-chan struct{} { return l.sess.Done() }

func (e *etcdLocker) session(ctx context.Context) (*concurrency.Session, error) {
	if e.sess != nil {
		select {
		case <-e.sess.Done(): // expired or orphaned: start a new one
			e.sess.Close()
			e.sess = nil
		default:
			return e.sess, nil
		}
	}
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl), concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	e.sess = s
	return s, nil
}

func (e *etcdLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	sess, err := e.session(ctx)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(sess, "/lockbench/lock/"+key)
	if e.wait == "try" {
		err = m.TryLock(ctx)
	} else {
		err = m.Lock(ctx)
	}
	if err != nil {
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, ErrNotAcquired
		}
		return nil, fmt.Errorf("etcd acquire %s: %w", key, err)
	}
	return &etcdLease{key: key, m: m, sess: sess, token: uint64(m.Header().Revision)}, nil
}

func (e *etcdLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*etcdLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not an etcd lease", lease)
	}
	// Delete the key only while it is still ours (the owner check the
	// Mutex offers for transactions): after the lease expired, the release
	// is refused instead of reported as done.
	resp, err := e.cli.Txn(ctx).If(l.m.IsOwner()).Then(clientv3.OpDelete(l.m.Key())).Commit()
	if err != nil {
		// The outcome is unknown (a member down, an election): the key may
		// still be ours, kept alive by the session. Give the session up:
		// its keep-alives stop at once, and revoking its lease deletes
		// the key as soon as the cluster answers. Later acquisitions get
		// a new session, so this can never remove a lock taken again.
		e.abandon(l.sess)
		return fmt.Errorf("etcd release %s: %w", l.key, err)
	}
	if !resp.Succeeded {
		return ErrNotHeld
	}
	return nil
}

// abandon gives sess up after a release whose outcome is unknown: later
// acquisitions get a new session, and its lease is revoked as soon as the
// cluster answers.
func (e *etcdLocker) abandon(sess *concurrency.Session) {
	if e.sess == sess {
		e.sess = nil
	}
	go revokeLater(e.cli, sess, time.Duration(e.ttl)*time.Second)
}

// revokeLater abandons sess and retries revoking its lease until the
// cluster answers or the lease must have expired anyway (without
// keep-alives it lives at most its TTL past the last one the leader saw,
// plus an election's extension).
func revokeLater(cli *clientv3.Client, sess *concurrency.Session, ttl time.Duration) {
	sess.Orphan()
	releaseLater(2*ttl+5*time.Second, func(ctx context.Context) bool {
		_, err := cli.Revoke(ctx, sess.Lease())
		return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
	})
}

func (e *etcdLocker) Close() error {
	if e.sess != nil {
		return e.sess.Close()
	}
	return nil
}

// LeaseTime: the session lease, in whole seconds (renewed in the
// background while the client lives).
func (b *etcdBackend) LeaseTime(ttl time.Duration) time.Duration {
	return time.Duration(b.ttlSeconds(ttl)) * time.Second
}

// RenewsInBackground: the session is kept alive by the library, unseen.
func (b *etcdBackend) RenewsInBackground() bool { return true }

// ExpiryBound: a lease runs out its TTL after the last keep-alive the
// leader saw, and a new leader extends every lease before it expires any:
// twice the TTL bounds both.
func (b *etcdBackend) ExpiryBound(ttl time.Duration) time.Duration { return 2 * b.LeaseTime(ttl) }

// Cycle: the lease. A fault's effect on an etcd lock depends on two
// periodic things: the session's keep-alive, sent every third of the
// lease, and the leader's lessor, which revokes expired leases on a 500 ms
// tick (server/lease/lessor.go, runLoop) shared by every lock of the
// cluster, so by every trial run side by side. The lease, whole seconds,
// is a multiple of both: an offset drawn over it meets both at every
// phase. Drawn over the keep-alive period alone (a third of a 1 s lease),
// the trials of one batch met the lessor's tick at nearly one phase and a
// pause of 1.1 leases showed two holders in 1 of 10 trials in one run and
// 9 of 10 in the next.
func (b *etcdBackend) Cycle(ttl time.Duration) time.Duration { return b.LeaseTime(ttl) }
