package main

import (
	"context"
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

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

// toxiproxyCmd serves toxiproxy's API: the toxiproxy container of a compose
// topology is this binary (same toxiproxy version as the in-process one).
func toxiproxyCmd() *command {
	c := newCommand("toxiproxy", "", "(internal) serve the toxiproxy API, for a compose topology's toxiproxy container", 0, 0)
	c.hidden = true
	listen := c.fs.String("listen", "0.0.0.0:8474", "address of the API")
	c.exec = func(ctx context.Context, cio cmdIO, _ []string) error {
		srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		errc := make(chan error, 1)
		go func() { errc <- srv.Listen(*listen) }()
		fmt.Fprintf(cio.stderr, "toxiproxy API on %s\n", *listen)
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return srv.Shutdown()
		}
	}
	return c
}
