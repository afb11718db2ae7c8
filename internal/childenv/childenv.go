// Package childenv says what environment a process the harness starts
// gets: what any program needs to run, lockbench's own settings, and the
// variables a caller names; never the rest of bench's environment, which
// may hold an SSH key, a database password or a cloud token.
package childenv

import (
	"os"
	"strings"
)

// kept are the variables every child gets when bench has them: to find
// programs and libraries, its home, locale, time zone and temp dir, and
// what the Go runtime of a worker (the same binary) reads.
var kept = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"LANG": true, "LANGUAGE": true, "TZ": true, "TMPDIR": true, "TERM": true,
	"XDG_CACHE_HOME": true, "XDG_RUNTIME_DIR": true,
	"GOCOVERDIR": true, "GORACE": true, "GOTRACEBACK": true, "GODEBUG": true, "GOMAXPROCS": true,
}

// Prefix marks lockbench's own settings (LOCKBENCH_RUN_ID,
// LOCKBENCH_DRIVER_TRACE, ...), which children get. A secret never goes in
// one: the docs say so, and the targets file names its own variables.
const Prefix = "LOCKBENCH_"

// Env returns the environment of a child of the harness: the kept
// variables, the LC_* locale ones and lockbench's own, then those named in
// names (when set), from bench's environment, and nothing else. A name
// given twice, or a kept one, appears once.
func Env(names ...string) []string {
	return filter(os.Environ(), names)
}

func filter(environ []string, names []string) []string {
	want := map[string]bool{}
	for _, n := range names {
		if n != "" {
			want[n] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			continue
		}
		if kept[k] || want[k] || strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, Prefix) {
			seen[k] = true
			out = append(out, kv)
		}
	}
	return out
}
