package backends

import (
	"context"
	"time"
)

// releaseLater retries try (one attempt, given a second) every 250ms until
// it reports done or for has passed. Backends whose release had an unknown
// outcome use it to give the lock up once the cluster answers again, as a
// client with an idempotent release would, instead of leaving it taken
// until the lease runs out; for is how long the lease may outlive its last
// renewal, after which there is nothing left to release. The first
// attempt is made whatever the time (a caller that ran late still tries).
func releaseLater(d time.Duration, try func(ctx context.Context) (done bool)) {
	end := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := try(ctx)
		cancel()
		if done {
			return
		}
		time.Sleep(250 * time.Millisecond)
		if !time.Now().Before(end) {
			return
		}
	}
}
