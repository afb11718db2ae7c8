package premise

import (
	"testing"
	"time"
)

// TestRetry: the first margin whose premise holds ends the retries; a
// premise unmet at every margin skips, never fails, and never passes.
func TestRetry(t *testing.T) {
	margins := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	var tried []time.Duration
	var inner *testing.T
	t.Run("met at the second", func(t *testing.T) {
		inner = t
		Retry(t, margins, func(m time.Duration) string {
			tried = append(tried, m)
			if m < 2*time.Millisecond {
				return "too slow"
			}
			return ""
		})
	})
	if len(tried) != 2 || inner.Skipped() || inner.Failed() {
		t.Errorf("tried %v, skipped %v, failed %v: want two margins tried and a pass", tried, inner.Skipped(), inner.Failed())
	}
	tried = nil
	t.Run("never met", func(t *testing.T) {
		inner = t
		Retry(t, margins, func(m time.Duration) string {
			tried = append(tried, m)
			return "took " + m.String()
		})
		t.Error("Retry returned after every margin went unmet: it must skip")
	})
	if len(tried) != 3 || !inner.Skipped() {
		t.Errorf("tried %v, skipped %v: want every margin tried, then a skip", tried, inner.Skipped())
	}
}

func TestClock(t *testing.T) {
	c := Start()
	if ok, _ := c.Within(time.Hour); !ok {
		t.Error("not within an hour of its start")
	}
	time.Sleep(2 * time.Millisecond)
	if ok, e := c.Within(time.Millisecond); ok || e < 2*time.Millisecond {
		t.Errorf("within 1ms after a 2ms sleep: %v %s", ok, e)
	}
}
