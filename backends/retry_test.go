package backends

import (
	"context"
	"testing"
	"time"
)

// TestReleaseLater: it stops at the first attempt that is done, gives each
// attempt a deadline, and gives up once its time has passed.
func TestReleaseLater(t *testing.T) {
	calls := 0
	releaseLater(time.Minute, func(ctx context.Context) bool {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("an attempt without a deadline")
		}
		return calls == 3
	})
	if calls != 3 {
		t.Errorf("done on the 3rd attempt, but %d were made", calls)
	}
	calls = 0
	releaseLater(300*time.Millisecond, func(context.Context) bool { calls++; return false })
	if calls < 1 || calls > 3 {
		t.Errorf("never done within 300ms: %d attempts, want 1 to 3 (the first whatever the time, then one each 250ms while time is left)", calls)
	}
}
