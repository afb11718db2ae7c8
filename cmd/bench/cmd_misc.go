package main

import (
	"context"
	"fmt"

	"github.com/lockbench/lockbench/internal/version"
	"github.com/lockbench/lockbench/internal/worker"
)

func versionCmd() *command {
	c := newCommand("version", "", "print the version (also bench --version)", 0, 0)
	c.exec = func(_ context.Context, cio cmdIO, _ []string) error {
		_, err := fmt.Fprintln(cio.stdout, version.Long())
		return err
	}
	return c
}

// workerCmd is one application instance, started by the coordinator with
// its configuration on stdin; not for people.
func workerCmd() *command {
	c := newCommand("worker", "", "(internal) one application instance, driven by the coordinator over stdin/stdout", 0, 0)
	c.hidden = true
	c.exec = func(ctx context.Context, cio cmdIO, _ []string) error {
		return worker.Run(ctx, cio.stdin, cio.stdout, cio.stderr)
	}
	return c
}
