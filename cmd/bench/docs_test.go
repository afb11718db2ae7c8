package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/docmark"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/jobs"
)

var update = flag.Bool("update", false, "rewrite generated tables in the documentation")

// docFiles are where the documentation lives: the README and docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	return append([]string{"../../README.md"}, files...)
}

// TestExitCodeTableIsTheCodes: the exit-code table in the documentation is
// exactly exitcode.Table (the CLI's help is generated from it), so the
// three never disagree. Regenerate with -update.
func TestExitCodeTableIsTheCodes(t *testing.T) {
	want := exitcode.Markdown()
	found := false
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.Index(s, "| code | meaning |\n")
		if i < 0 {
			continue
		}
		j := strings.Index(s[i:], "\n\n")
		if j < 0 {
			j = len(s) - i
		}
		found = true
		if got := s[i : i+j+1]; got != want {
			if *update {
				os.WriteFile(f, []byte(s[:i]+want+s[i+j+1:]), 0o644)
				continue
			}
			t.Errorf("%s: the exit-code table differs from exitcode.Table (go test ./cmd/bench -run ExitCodeTable -update):\n got:\n%s\nwant:\n%s", f, got, want)
		}
	}
	if !found {
		t.Error("no exit-code table in the README or docs/")
	}
	if !strings.Contains(exitCodes, "101 invalid run") {
		t.Errorf("the help's table is not generated from exitcode.Table:\n%s", exitCodes)
	}
}

// TestDocsNameRealFiles: every file and folder docs/extending.md and
// docs/architecture.md name in backquotes exists (a name with a
// placeholder, <name>, stands for a file to create), and the layout in
// docs/extending.md lists every package of the module: what a newcomer
// is told to touch is there.
func TestDocsNameRealFiles(t *testing.T) {
	path := regexp.MustCompile("`((?:[a-z0-9_.-]+/)+[A-Za-z0-9_.<>-]*)`")
	for _, doc := range []string{"../../docs/extending.md", "../../docs/architecture.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range path.FindAllStringSubmatch(string(b), -1) {
			p := m[1]
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") || first == "gonum" {
				continue // a Go module (golang.org/x/crypto/ssh, gonum/plot), not a file
			}
			if strings.Contains(p, "<") {
				p = filepath.Dir(p) // a file to create: its folder must exist
			}
			if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
				t.Errorf("%s names %s, which does not exist", filepath.Base(doc), m[1])
			}
		}
	}
	b, err := os.ReadFile("../../docs/extending.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (strings.HasPrefix(f[0], "internal/") || strings.HasSuffix(f[0], "/") || f[0] == "history") {
			listed[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	out, err := exec.Command("go", "list", "github.com/lockbench/lockbench/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, "github.com/lockbench/lockbench/")
		top, _, _ := strings.Cut(rel, "/")
		if !listed[rel] && !listed[top] && !listed[filepath.Dir(rel)] {
			t.Errorf("docs/extending.md's layout does not list %s", rel)
		}
	}
}

// TestREADMEFrontDoor: the README is a front door a newcomer reads in a
// minute — at most 200 lines, its first 40 showing the two commands and
// the decision view — and its scenario example is a scenario bench
// validates as it stands.
func TestREADMEFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if n := len(lines); n > 200 {
		t.Errorf("the README has %d lines, more than 200: reference belongs in docs/", n)
	}
	first := strings.Join(lines[:min(40, len(lines))], "\n")
	for _, want := range []string{"make bench", "make test", "docs/decision.png"} {
		if !strings.Contains(first, want) {
			t.Errorf("the README's first 40 lines do not show %q", want)
		}
	}
	var example []string
	in := false
	for _, l := range lines {
		switch {
		case l == "```yaml":
			in = true
		case in && l == "```":
			in = false
		case in:
			example = append(example, l)
		}
	}
	if len(example) == 0 {
		t.Fatal("the README shows no scenario example")
	}
	f := filepath.Join(t.TempDir(), "readme.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(example, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runInProcess(t, "validate", f); err != nil {
		t.Errorf("the README's scenario example does not validate: %v\n%s", err, out)
	}
}

// TestHistoryCounts: the counts of hand-made histories docs/checker.md
// gives are the tree's (make them again with `go test ./cmd/bench -run
// TestHistoryCounts -update`), so no document says 156 where the tree
// holds 173.
func TestHistoryCounts(t *testing.T) {
	count := func(dir string) int {
		m, err := filepath.Glob(filepath.Join("../../checker/testdata", dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	want := fmt.Sprintf("`checker/testdata/` holds %d hand-made histories with golden verdicts;\n"+
		"`checker/testdata/model/` holds %d more, and `checker/testdata/figures/`\n%d,\n",
		count(""), count("model"), count("figures"))
	docmark.Hold(t, "../../docs/checker.md", "history counts", want, *update, "go test ./cmd/bench -run TestHistoryCounts -update")
}

// faultTable is docs/scenarios.md's table of faults, from their
// registrations: what each does and what shows it applied (Info.Does,
// Info.Observed), its targets, the server kinds it acts on (those that
// declare what it asks) and what it needs of the machine.
func faultTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| type | targets | what it does | observed as applied when |\n|---|---|---|---|\n")
	for _, f := range faults.All() {
		if f.Does == "" || f.Observed == "" {
			t.Errorf("fault %s: Does and Observed (faults.Info) are what docs/scenarios.md's table says of it: declare them in its registration", f.Name)
		}
		var ts []string
		for _, k := range f.Targets {
			ts = append(ts, string(k))
		}
		targets := strings.Join(ts, ", ")
		if kinds := f.ActsOn(cluster.FaultKinds()); kinds != nil {
			targets += " of kind " + strings.Join(kinds, ", ")
		}
		var reqs []string
		for _, r := range f.Requires() {
			reqs = append(reqs, string(r))
		}
		if len(reqs) > 0 {
			targets += " (needs " + strings.Join(reqs, ", ") + ")"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, targets, f.Does, f.Observed)
	}
	return b.String()
}

// TestFaultTableInDocs: docs/scenarios.md's table of faults is the
// registry's (go test ./cmd/bench -run TestFaultTableInDocs -update).
func TestFaultTableInDocs(t *testing.T) {
	docmark.Hold(t, "../../docs/scenarios.md", "faults", faultTable(t), *update, "go test ./cmd/bench -run TestFaultTableInDocs -update")
}

// backendTable is docs/backends.md's table of backends, from their
// registrations (backends.Info.Doc), with what a paused holder shows
// (Info.Paused) and whether a driver may name it (Info.Drivers).
func backendTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| name | servers | what it models | fencing token | lost signal | paused past its lease | options (defaults) |\n|---|---|---|---|---|---|---|\n")
	for _, i := range backends.All() {
		d := i.Doc
		if d.Servers == "" || d.Models == "" || d.Token == "" || d.Lost == "" || d.Options == "" {
			t.Errorf("backend %s: its registration's Doc (servers, what it models, token, lost signal, options) is what docs/backends.md's table says of it: declare every field", i.Name)
		}
		paused := "its holder keeps the lock, with no signal"
		if i.Paused.Excused == "" && i.Paused.Shows == "" {
			t.Errorf("backend %s: its registration's Paused says what a paused holder shows, or why it is not tried so (backends.Paused)", i.Name)
		}
		switch {
		case i.Paused.Excused != "":
			paused = "not tried: " + i.Paused.Excused
		case i.Paused.Shows == backends.PauseLost:
			paused = "its holder learns the lease is lost"
		}
		name := "`" + i.Name + "`"
		if i.Drivers {
			name += " (a driver's server)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", name, d.Servers, d.Models, d.Token, d.Lost, paused, d.Options)
	}
	return b.String()
}

// TestBackendTableInDocs: docs/backends.md's table of backends is the
// registry's (go test ./cmd/bench -run TestBackendTableInDocs -update).
func TestBackendTableInDocs(t *testing.T) {
	docmark.Hold(t, "../../docs/backends.md", "backends", backendTable(t), *update, "go test ./cmd/bench -run TestBackendTableInDocs -update")
}

// TestResultsFolderTableInDocs: docs/results.md's table of a results
// folder is the files' registry (layout.Files: each registered by what
// writes it; go test ./cmd/bench -run TestResultsFolderTableInDocs -update).
func TestResultsFolderTableInDocs(t *testing.T) {
	docmark.Hold(t, "../../docs/results.md", "results folder", layout.Markdown(), *update, "go test ./cmd/bench -run TestResultsFolderTableInDocs -update")
}

// TestSecurityClaimsAreTested: every test docs/security.md names for its
// guarantees exists, and make security runs it.
func TestSecurityClaimsAreTested(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)SECURITY_TESTS := (.*?)\n\n`).FindSubmatch(mk)
	if list == nil {
		t.Fatal("the Makefile has no SECURITY_TESTS")
	}
	names := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllSubmatch(doc, -1)
	if len(names) < 20 {
		t.Fatalf("docs/security.md names %d tests", len(names))
	}
	sources, _ := exec.Command("grep", "-rhoE", "--include=*_test.go", `^func Test[A-Za-z0-9_]+\(`, "../..").Output()
	for _, m := range names {
		name := string(m[1])
		if !strings.Contains(string(sources), "func "+name+"(") {
			t.Errorf("docs/security.md names %s, which no test file defines", name)
		}
		if !regexp.MustCompile(`[':|]` + name + `[|']`).Match(list[1]) {
			t.Errorf("docs/security.md names %s, which make security does not run (SECURITY_TESTS)", name)
		}
	}
}

// registeredList is the README's list of what is registered: backends,
// job strategies, faults and server kinds, each by name.
func registeredList() string {
	var b strings.Builder
	line := func(what string, names []string) {
		for i := range names {
			names[i] = "`" + names[i] + "`"
		}
		fmt.Fprintf(&b, "- %s (%d): %s\n", what, len(names), strings.Join(names, ", "))
	}
	var bk, st, fl, kd []string
	for _, i := range backends.All() {
		bk = append(bk, i.Name)
	}
	for _, i := range jobs.All() {
		st = append(st, i.Name)
	}
	for _, i := range faults.All() {
		fl = append(fl, i.Name)
	}
	for _, k := range cluster.Kinds() {
		kd = append(kd, k.Name)
	}
	line("lock backends ([docs/backends.md](docs/backends.md))", bk)
	line("job strategies ([docs/jobs.md](docs/jobs.md))", st)
	line("faults ([docs/scenarios.md](docs/scenarios.md))", fl)
	line("server kinds lockbench starts", kd)
	return b.String()
}

// TestRegisteredListInREADME: the README's list of backends, job
// strategies, faults and server kinds is the registries' (go test
// ./cmd/bench -run TestRegisteredListInREADME -update).
func TestRegisteredListInREADME(t *testing.T) {
	docmark.Hold(t, "../../README.md", "registered", registeredList(), *update, "go test ./cmd/bench -run TestRegisteredListInREADME -update")
}
