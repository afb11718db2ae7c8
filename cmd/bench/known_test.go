package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// knownSubset is the part of the known-answer suite that runs inside
// `make test`, side by side with the other integration tests; `make known`
// runs all of it. Z2 (twenty ZooKeeper ensembles, 244 s here) was the
// longest pole of make test by a minute; it runs in make known only.
var knownSubset = []string{
	"R1-redis-pause", "R2-release-after-expiry", "R3-redis-clock-jump",
	"E1-etcd-pause", "Z1-zookeeper-pause", "P1-postgres-pause", "M1-wrong-token-release",
	"M2-extension-fails",
}

// TestKnownAnswers: the harness reproduces, on this machine, the outcomes
// the literature gives for these rows, in the stated number of trials.
func TestKnownAnswers(t *testing.T) {
	needRedis(t)
	for _, name := range knownSubset {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "out")
			stdout, stderr, err := runInProcess(t, "run", "-q", "-dir", dir, filepath.Join("../../scenarios/known", name+".yaml"))
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			out, _, err := runInProcess(t, "table", dir)
			if err != nil || strings.Count(out, "| reproduced |") == 0 {
				t.Errorf("table: %v\n%s", err, out)
			}
			t.Log("\n" + out)
		})
	}
}
