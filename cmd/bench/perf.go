package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/perf"
)

func perfCmd() *command {
	c := newCommand("perf", "", "measure what the harness costs against a bare lock loop (make perf)", 0, 0)
	c.long = `Runs, for each backend, a bare lock loop (the same backend code and client
library, no harness) and the harness on the same workload (full: with the
protected resource; direct: the lock and the recording only), interleaved,
and prints the ratios.`
	list := c.fs.String("backends", "redis,etcd", "backends to measure, comma-separated")
	clients := c.fs.Int("clients", 64, "concurrent clients, each on a key of its own")
	dur := c.fs.Duration("duration", 5*time.Second, "length of each measured run")
	rounds := c.fs.Int("rounds", 3, "interleaved rounds of bare, full and direct runs")
	out := c.fs.String("o", filepath.Join(os.TempDir(), "lockbench-perf"), "folder for the harness runs' results")
	c.exec = func(ctx context.Context, cio cmdIO, _ []string) error {
		if *clients < 1 || *dur <= 0 || *rounds < 1 {
			return exitcode.With(errors.New("perf: -clients, -duration and -rounds must be positive"), exitcode.Config)
		}
		o := perf.Options{Backends: strings.Split(*list, ","), Clients: *clients, Duration: *dur, Rounds: *rounds, Dir: *out, Log: cio.stderr}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		res, err := perf.Run(ctx, o)
		if err != nil {
			return err
		}
		perf.Table(cio.stdout, res, o)
		return nil
	}
	return c
}
