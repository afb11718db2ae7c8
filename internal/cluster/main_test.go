package cluster

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("LOCKBENCH_POWERFS_HELPER") != "" {
		powerChild()
	}
	os.Exit(m.Run())
}
