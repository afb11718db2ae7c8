package backends_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
)

// startBackend makes backend with its options (YAML) and starts its real
// servers, stopped when the test ends.
func startBackend(t *testing.T, run, backend, options string) (backends.Backend, *cluster.Cluster) {
	t.Helper()
	be, err := backends.New(backend, func(v any) error { return config.DecodeStrictBytes([]byte(options), v, 0) })
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(run, filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if err := cl.Start(context.Background(), be.Servers()); err != nil {
		t.Fatal(err)
	}
	return be, cl
}
