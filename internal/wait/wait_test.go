package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a full sleep reported cut short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) || Sleep(ctx, 0) {
		t.Error("a sleep on an ended context reported elapsed")
	}
}

func TestUntil(t *testing.T) {
	bg := context.Background()
	n := 0
	if ok, err := Until(bg, time.Millisecond, time.Second, func() (bool, error) { n++; return n == 3, nil }); !ok || err != nil || n != 3 {
		t.Errorf("became true on the third call: ok=%v err=%v calls=%d", ok, err, n)
	}
	if ok, err := Until(bg, time.Millisecond, 5*time.Millisecond, func() (bool, error) { return false, nil }); ok || err != nil {
		t.Errorf("never true: ok=%v err=%v", ok, err)
	}
	boom := errors.New("boom")
	if _, err := Until(bg, time.Millisecond, time.Second, func() (bool, error) { return false, boom }); err != boom {
		t.Errorf("cond's error: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if ok, err := Until(ctx, time.Millisecond, time.Hour, func() (bool, error) { return false, nil }); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: ok=%v err=%v", ok, err)
	}
}
