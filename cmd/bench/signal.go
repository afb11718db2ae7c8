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
// and tears everything down. A second one exits at once, whatever phase
// the command is in; what it leaves (child processes, a firewall chain, a
// data dir, an address slot) dies with it or is removed by the next run.
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
			fmt.Fprintf(os.Stderr, "bench: second %s: exiting now\n", s)
			os.Exit(int(exitcode.Interrupted))
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(ch)
		cancel()
	}
}
