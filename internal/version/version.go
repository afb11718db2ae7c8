// Package version names the lockbench build: what `bench --version` prints
// and run.json records.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X .../internal/version.Version=v1.2.3")
// for a release; otherwise it is "dev" and String adds the VCS revision.
var Version = "dev"

// String returns the version, with the VCS revision and "+dirty" when the
// build had uncommitted changes ("dev-1a2b3c4d5e6f+dirty").
func String() string {
	v := Version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && v == "dev" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += "-" + rev
		if dirty {
			v += "+dirty"
		}
	}
	return v
}

// Long is String with the Go version and platform, for --version.
func Long() string {
	return "bench " + String() + " (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
