package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/exitcode"
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
