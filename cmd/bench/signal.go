package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockbench/lockbench/internal/exitcode"
)

// signalContext is cancelled by the first SIGINT or SIGTERM: the run stops
// and tears everything down (exit 105 once it has). A second one exits at
// once, whatever phase the command is in, with exit 1 (the harness), not
// 105: the teardown did not complete. What it leaves (child processes, a
// firewall chain, a data dir, a power-loss layer, an address slot) dies
// with it or is repaired by the next run, which says what it repaired.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s, ok := <-ch
		if !ok {
			return
		}
		cancel()
		if _, ok := <-ch; ok {
			fmt.Fprintf(os.Stderr, "bench: second %s: exiting now, teardown abandoned (the next run repairs what is left)\n", s)
			os.Exit(int(exitcode.Harness))
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(ch)
		cancel()
	}
}
