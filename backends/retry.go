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
// renewal, after which there is nothing left to release.
func releaseLater(d time.Duration, try func(ctx context.Context) (done bool)) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := try(ctx)
		cancel()
		if done {
			return
		}
	}
}
