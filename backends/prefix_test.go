package backends

import (
	"context"
	"testing"
)

// fakeLocker is a pure in-memory Locker for the wrapper's unit test.
type fakeLocker struct{ keys []string }

type fakeLease struct{ key string }

func (l *fakeLease) Key() string           { return l.key }
func (l *fakeLease) Token() uint64         { return 1 }
func (l *fakeLease) Lost() <-chan struct{} { return nil }

func (f *fakeLocker) Acquire(_ context.Context, key string) (Lease, error) {
	f.keys = append(f.keys, "acquire "+key)
	return &fakeLease{key: key}, nil
}
func (f *fakeLocker) Release(_ context.Context, l Lease) error {
	f.keys = append(f.keys, "release "+l.Key())
	return nil
}
func (f *fakeLocker) Close() error { return nil }
func (f *fakeLocker) Extend(_ context.Context, l Lease) error {
	f.keys = append(f.keys, "extend "+l.Key())
	return nil
}

// TestWithKeyPrefix: the backend sees prefixed keys, the caller its own;
// the wrapper has the abilities of the wrapped Locker and no others.
func TestWithKeyPrefix(t *testing.T) {
	f := &fakeLocker{}
	l := WithKeyPrefix(f, "run7/")
	lease, err := l.Acquire(context.Background(), "k0")
	if err != nil || lease.Key() != "k0" {
		t.Fatalf("lease %v %v", lease, err)
	}
	ext, ok := l.(Extender)
	if !ok {
		t.Fatal("the wrapper lost Extend")
	}
	ext.Extend(context.Background(), lease)
	l.Release(context.Background(), lease)
	want := []string{"acquire run7/k0", "extend run7/k0", "release run7/k0"}
	for i, w := range want {
		if i >= len(f.keys) || f.keys[i] != w {
			t.Fatalf("backend saw %v, want %v", f.keys, want)
		}
	}
	if _, ok := l.(Store); ok {
		t.Error("the wrapper claims Store, which the wrapped Locker lacks")
	}
	if _, ok := l.(Forger); ok {
		t.Error("the wrapper claims Forge, which the wrapped Locker lacks")
	}
	if WithKeyPrefix(f, "") != Locker(f) {
		t.Error("an empty prefix must not wrap")
	}
}
