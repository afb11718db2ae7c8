package cluster

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/internal/docmark"
)

var update = flag.Bool("update", false, "rewrite scripts/kinds.mk from the registered server kinds")

// TestEveryServerKindIsComplete: every server kind a backend asks for is
// registered, and every registered kind can start, find its binary and
// name its version, and declares everything the rest of lockbench reads
// of it — what faults may do to it (held to what the faults implement),
// its credential family, what make setup installs, where it is deployed —
// each failure naming the place to declare it; a backend a driver may
// name starts only kinds drivers may talk to.
func TestEveryServerKindIsComplete(t *testing.T) {
	builds := buildable(t)
	for _, k := range Kinds() {
		at := "internal/cluster's " + k.Name + " registration (RegisterKind)"
		if k.Start == nil || k.Binary == nil || k.Version == nil {
			t.Errorf("server kind %s: Start, Binary and Version are required: %s", k.Name, at)
		}
		if err := k.Faults.Check(); err != nil {
			t.Errorf("server kind %s: Faults (what faults may do to it): %v: %s", k.Name, err, at)
		}
		if k.Credentials == "" {
			t.Errorf("server kind %s: Credentials: declare the family of credentials a targets file gives its servers (its auth section's key, what the backend passes to env.Credentials): %s", k.Name, at)
		}
		if len(k.Setup.Apt) == 0 && k.Setup.Build == "" {
			t.Errorf("server kind %s: Setup: declare what make setup installs (Debian packages with their presence checks, or a build of scripts/build-servers.sh), then `go test ./internal/cluster -run TestKindsMakefile -update`: %s", k.Name, at)
		}
		for _, p := range k.Setup.Apt {
			if p.Name == "" || p.Present == "" {
				t.Errorf("server kind %s: Setup.Apt %+v: a package needs its name and how the Makefile sees it installed: %s", k.Name, p, at)
			}
		}
		if b := k.Setup.Build; b != "" && !slices.Contains(builds, b) {
			t.Errorf("server kind %s: Setup.Build %q: scripts/build-servers.sh builds %s only; add a build_%s there", k.Name, b, strings.Join(builds, ", "), b)
		}
		if (k.Compose == "" || k.Kube == "") && k.NotDeployed == "" {
			t.Errorf("server kind %s: Compose and Kube: name its profile of compose/docker-compose.yml and its group of internal/machinery/kube's topology (then `make kube-manifests`), or say in NotDeployed why it has none: %s", k.Name, at)
		}
	}
	for _, info := range backends.All() {
		be, err := info.New(func(any) error { return nil })
		if err != nil {
			t.Errorf("backend %s with its defaults: %v", info.Name, err)
			continue
		}
		specs := be.Servers()
		for _, sp := range specs {
			k, err := LookupKind(sp.Kind)
			switch {
			case err != nil:
				t.Errorf("backend %s: server %s: %v: register the kind in a file of internal/cluster (redis.go is the shape)", info.Name, sp.Name, err)
			case info.Drivers && !k.Drivers:
				t.Errorf("backend %s lets drivers name it, but its server %s is of kind %s, which does not let drivers talk to it (Kind.Drivers)", info.Name, sp.Name, sp.Kind)
			}
		}
		for _, l := range ServerLinks(specs) {
			if l == "" {
				t.Errorf("backend %s: an unnamed server-side link", info.Name)
			}
		}
	}
	if !HasLeader("etcd") || HasLeader("redis") || !IsMaster("redis-replicated") || IsMaster("etcd") || !BindsSource("consul") || BindsSource("zookeeper") {
		t.Error("leader, master and source-binding roles are not the kinds' own")
	}
}

// buildable lists the servers scripts/build-servers.sh builds (its
// `name) build_name ;;` cases).
func buildable(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../scripts/build-servers.sh")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-z0-9-]+)\) build_`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// kindsMakefile is scripts/kinds.mk: what make setup installs for the
// server kinds, and the compose topology's profiles, from their
// registrations.
func kindsMakefile() string {
	var b strings.Builder
	b.WriteString("# Generated from the server kinds internal/cluster registers (Kind.Setup,\n" +
		"# Kind.Compose) by `go test ./internal/cluster -run TestKindsMakefile -update`:\n" +
		"# do not edit; declare a kind's packages and profile in its registration.\n\n")
	b.WriteString("# KIND_PKGS_MISSING adds to $$missing the Debian packages of the kinds that\n# are not installed.\nKIND_PKGS_MISSING =")
	var seen, builds, profiles []string
	for _, k := range Kinds() {
		for _, p := range k.Setup.Apt {
			if slices.Contains(seen, p.Name) {
				continue
			}
			seen = append(seen, p.Name)
			fmt.Fprintf(&b, " \\\n\t{ %s; } >/dev/null 2>&1 || missing=\"$$missing %s\";", strings.ReplaceAll(p.Present, "$", "$$"), p.Name)
		}
		if k.Setup.Build != "" && !slices.Contains(builds, k.Setup.Build) {
			builds = append(builds, k.Setup.Build)
		}
		if k.Compose != "" && !slices.Contains(profiles, k.Compose) {
			profiles = append(profiles, k.Compose)
		}
	}
	b.WriteString("\n\n# KIND_BUILDS are the servers scripts/build-servers.sh builds for the kinds.\n")
	fmt.Fprintf(&b, "KIND_BUILDS := %s\n", strings.Join(builds, " "))
	b.WriteString("\n# COMPOSE_PROFILES are the compose topology's profiles, one a kind.\nCOMPOSE_PROFILES :=")
	for _, p := range profiles {
		b.WriteString(" --profile " + p)
	}
	b.WriteString("\n")
	return b.String()
}

// TestKindsMakefile: scripts/kinds.mk is the kinds' registrations (-update
// writes it), and the Makefile includes it and installs and composes by
// it: what make setup installs comes from each kind's Setup.
func TestKindsMakefile(t *testing.T) {
	docmark.HoldFile(t, "../../scripts/kinds.mk", []byte(kindsMakefile()), *update, "go test ./internal/cluster -run TestKindsMakefile -update")
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, use := range []string{"include scripts/kinds.mk", "$(KIND_PKGS_MISSING)", "$(KIND_BUILDS)", "$(COMPOSE_PROFILES)"} {
		if !strings.Contains(string(mk), use) {
			t.Errorf("the Makefile does not use %s: what make setup installs must come from the kinds", use)
		}
	}
}

// TestKindsDeployed: every profile of compose/docker-compose.yml is a
// kind's (Kind.Compose) and every kind's profile is there; every
// StatefulSet of kube/lockbench.yaml (internal/machinery/kube's topology) is a
// kind's group (Kind.Kube) and every kind's group is there.
func TestKindsDeployed(t *testing.T) {
	hold := func(file, what string, re *regexp.Regexp, declared func(Kind) string) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var there []string
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			there = append(there, m[1])
		}
		var want []string
		for _, k := range Kinds() {
			if d := declared(k); d != "" {
				want = append(want, d)
				if !slices.Contains(there, d) {
					t.Errorf("server kind %s declares %s %q, which %s does not have", k.Name, what, d, file)
				}
			}
		}
		for _, d := range there {
			if !slices.Contains(want, d) {
				t.Errorf("%s has %s %q, which no server kind declares", file, what, d)
			}
		}
	}
	hold("../../compose/docker-compose.yml", "the compose profile", regexp.MustCompile(`profiles: \[([a-z0-9-]+)\]`), func(k Kind) string { return k.Compose })
	hold("../../kube/lockbench.yaml", "the Kubernetes group", regexp.MustCompile(`(?m)^kind: StatefulSet\nmetadata:\n(?:  .*\n)*?  name: ([a-z0-9-]+)\n`), func(k Kind) string { return k.Kube })
}
