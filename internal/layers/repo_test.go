package layers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTracked bounds a tracked file's size: the largest today is a
// screenshot under 500 KB; a build's binary is tens of megabytes.
const maxTracked = 1 << 20

// TestNoBinariesTracked fails on a tracked file over 1 MB, and on any
// tracked executable program (ELF, Mach-O, PE, or a file marked
// executable whose content is not text): build output belongs in bin/
// (ignored), never in a clone. A 54 MB bench binary was once committed
// at the root and made up 92% of a fresh clone.
func TestNoBinariesTracked(t *testing.T) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	cmd := exec.Command("git", "ls-files", "-s", "-z")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing is tracked", err)
	}
	for _, entry := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(entry, "\t")
		if !ok {
			continue
		}
		mode := strings.Fields(meta)[0]
		if mode == "120000" || mode == "160000" {
			continue // a symlink, a submodule
		}
		if msg := binaryProblem(filepath.Join(dir, path), mode == "100755"); msg != "" {
			t.Errorf("%s is tracked: %s (build into bin/, which is ignored)", path, msg)
		}
	}
}

// binaryProblem says why a file must not be tracked, or "".
func binaryProblem(path string, executable bool) string {
	st, err := os.Stat(path)
	if err != nil {
		return "" // deleted in the work tree: git will say
	}
	if st.Size() > maxTracked {
		return fmt.Sprintf("%d bytes, over the %d a tracked file may have", st.Size(), maxTracked)
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 8<<10)
	n, _ := f.Read(head)
	head = head[:n]
	for _, magic := range [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {0xca, 0xfe, 0xba, 0xbe}, []byte("MZ")} {
		if bytes.HasPrefix(head, magic) && (executable || len(magic) == 4) {
			return "an executable program"
		}
	}
	if executable && bytes.IndexByte(head, 0) >= 0 {
		return "marked executable and not text"
	}
	return ""
}

// TestBinaryProblem: what the check takes for a binary, and what not.
func TestBinaryProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name       string
		content    []byte
		executable bool
		bad        bool
	}{
		{"script.sh", []byte("#!/bin/sh\necho hi\n"), true, false},
		{"image.png", []byte("\x89PNG\r\n\x1a\n\x00\x00"), false, false},
		{"bench", append([]byte{0x7f, 'E', 'L', 'F'}, 0, 0, 0), true, true},
		{"bench-unmarked", append([]byte{0x7f, 'E', 'L', 'F'}, 0, 0, 0), false, true},
		{"blob", []byte("a\x00b"), true, true},
		{"readme.md", []byte("MZ is a text here"), false, false},
		{"big", bytes.Repeat([]byte("x"), maxTracked+1), false, true},
	} {
		if got := binaryProblem(write(tt.name, tt.content), tt.executable) != ""; got != tt.bad {
			t.Errorf("%s: refused %v, want %v", tt.name, got, tt.bad)
		}
	}
}

// maxLines bounds a Go source file outside tests: a file a newcomer can
// read whole. A longer one holds two concepts; split it where they part.
const maxLines = 600

// TestFilesStaySmall fails on a tracked .go file, tests aside, over
// maxLines lines.
func TestFilesStaySmall(t *testing.T) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	cmd := exec.Command("git", "ls-files", "-z", "*.go")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (%v)", err)
	}
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if path == "" || strings.HasSuffix(path, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			continue // deleted in the work tree
		}
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, over %d: split it where its concepts part", path, n, maxLines)
		}
	}
}
