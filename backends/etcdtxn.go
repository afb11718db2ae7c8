package backends

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd-txn is the etcd Mutex with its protected write in the lock's own
// transaction: the critical section reads a counter key, works, and the
// release writes the counter plus one and deletes the lock key in one
// transaction guarded by the Mutex's owner check (the lock key still
// exists with this holder's create revision). That is the write Jepsen's
// etcd lock workload treats as fenced: a holder whose lease expired while
// it worked finds its key gone, and its write is refused with the
// release, whoever holds the lock now. The same Mutex with the write sent
// elsewhere is the etcd backend with the harness's resource. The counter
// lives in etcd under /lockbench/data/<key>; see Store for how the
// checker proves from it that no update was lost.
func init() {
	Register(Info{Name: "etcd-txn",
		Doc: Doc{
			Servers: "3 etcd members, as `etcd`",
			Models:  "the `etcd` Mutex with its protected write in the lock's own transaction: the work reads a counter key, and the release writes it plus one and deletes the lock key in one transaction guarded by `Mutex.IsOwner()` (the write Jepsen's etcd lock workload treats as fenced); a holder whose lease expired has its write refused with the release",
			Token:   "the revision, as `etcd` (the guard, not the token, refuses late work)",
			Lost:    "`Session.Done()`",
			Options: "as `etcd`"},
		Paused:  Paused{Shows: PauseLost, For: 4 * time.Second},
		Summary: "etcd Mutex with the protected write in the release's transaction, guarded on the lock key (Jepsen's fenced etcd write)",
		Options: EtcdOptions{}, New: newEtcdTxn})
}

type etcdTxnBackend struct{ etcdBackend }

func newEtcdTxn(decode Decoder) (Backend, error) {
	b, err := newEtcd(decode)
	if err != nil {
		return nil, err
	}
	return &etcdTxnBackend{*b.(*etcdBackend)}, nil
}

const etcdDataPrefix = "/lockbench/data/"

func (b *etcdTxnBackend) Open(ctx context.Context, env Env) (Locker, error) {
	l, err := b.etcdBackend.Open(ctx, env)
	if err != nil {
		return nil, err
	}
	return &etcdTxnLocker{etcdLocker: l.(*etcdLocker)}, nil
}

// Totals reads every counter key, from the coordinator.
func (b *etcdTxnBackend) Totals(ctx context.Context, env Env) (map[string]int64, error) {
	cli, err := b.client(env)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, etcdDataPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read totals: %w", err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		v, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("read totals: %s holds %q: %v", kv.Key, kv.Value, err)
		}
		out[strings.TrimPrefix(string(kv.Key), etcdDataPrefix)] = v
	}
	return out, nil
}

type etcdTxnLocker struct{ *etcdLocker }

// txnLease is an etcd lease with the value its work will write at release
// (none when the work was cut short).
type txnLease struct {
	*etcdLease
	write *int64
}

func (e *etcdTxnLocker) Acquire(ctx context.Context, key string) (Lease, error) {
	l, err := e.etcdLocker.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return &txnLease{etcdLease: l.(*etcdLease)}, nil
}

// Work reads the counter, works, and leaves the increment to the release's
// transaction.
func (e *etcdTxnLocker) Work(ctx context.Context, lease Lease, hold func() bool) (bool, error) {
	l, ok := lease.(*txnLease)
	if !ok {
		return false, fmt.Errorf("work: lease of type %T is not an etcd-txn lease", lease)
	}
	resp, err := e.cli.Get(ctx, etcdDataPrefix+l.key)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", l.key, err)
	}
	var v int64
	if len(resp.Kvs) > 0 {
		if v, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil {
			return false, fmt.Errorf("read %s: %q: %v", l.key, resp.Kvs[0].Value, err)
		}
	}
	if !hold() {
		return false, nil
	}
	v++
	l.write = &v
	return true, nil
}

// Release writes the work's increment (if any) and deletes the lock key in
// one transaction, only while the lock key is still this holder's: refused,
// nothing is written (ErrNotHeld). An error leaves the outcome unknown and
// the session is given up as in the etcd backend's release.
func (e *etcdTxnLocker) Release(ctx context.Context, lease Lease) error {
	l, ok := lease.(*txnLease)
	if !ok {
		return fmt.Errorf("release: lease of type %T is not an etcd-txn lease", lease)
	}
	ops := []clientv3.Op{clientv3.OpDelete(l.m.Key())}
	if l.write != nil {
		ops = append(ops, clientv3.OpPut(etcdDataPrefix+l.key, strconv.FormatInt(*l.write, 10)))
		l.write = nil
	}
	resp, err := e.cli.Txn(ctx).If(l.m.IsOwner()).Then(ops...).Commit()
	if err != nil {
		e.abandon(l.sess)
		return fmt.Errorf("etcd-txn release %s: %w", l.key, err)
	}
	if !resp.Succeeded {
		return ErrNotHeld
	}
	return nil
}
