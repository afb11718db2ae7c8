package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// profile writes a CPU profile of this process (coordinator or worker) into
// $LOCKBENCH_CPUPROFILE_DIR when it is set: how `make perf` findings are
// explained. It returns how to stop it.
func profile() func() {
	dir := os.Getenv("LOCKBENCH_CPUPROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	name := "coordinator"
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		name = "worker"
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.prof", name, os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
