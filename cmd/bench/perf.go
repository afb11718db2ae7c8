package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/perf"
)

// cmdPerf measures what the harness costs against a bare lock loop.
func cmdPerf(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.String("backends", "redis,etcd", "backends to measure, comma-separated")
	clients := fs.Int("clients", 64, "concurrent clients, each on a key of its own")
	dur := fs.Duration("duration", 5*time.Second, "length of each measured run")
	rounds := fs.Int("rounds", 3, "interleaved rounds of bare, full and direct runs")
	out := fs.String("o", filepath.Join(os.TempDir(), "lockbench-perf"), "folder for the harness runs' results")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: bench perf [flags]

Runs, for each backend, a bare lock loop (the same backend code and client
library, no harness) and the harness on the same workload (full: with the
protected resource; direct: the lock and the recording only), interleaved,
and prints the ratios.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 0 || *clients < 1 || *dur <= 0 || *rounds < 1 {
		fs.Usage()
		return exitcode.With(errors.New("perf takes flags only, with positive values"), exitcode.Config)
	}
	o := perf.Options{Backends: strings.Split(*list, ","), Clients: *clients, Duration: *dur, Rounds: *rounds, Dir: *out, Log: stderr}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	res, err := perf.Run(ctx, o)
	if err != nil {
		return err
	}
	perf.Table(stdout, res, o)
	return nil
}
