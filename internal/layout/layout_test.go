package layout

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNewNeverSharesAFolder: two runs of one scenario in the same second
// get two folders.
func TestNewNeverSharesAFolder(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		d, err := New(root, "quick", now)
		if err != nil {
			t.Fatal(err)
		}
		if seen[d] {
			t.Fatalf("folder %s handed out twice", d)
		}
		seen[d] = true
	}
	if !seen[filepath.Join(root, "20261130-090000-quick-3")] {
		t.Errorf("folders: %v", seen)
	}
}

func TestClaimRefusesAFolderWithFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Claim(dir, false); err != nil {
		t.Fatalf("an empty folder must be accepted: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "old.png"), []byte("x"), 0o644)
	if err := Claim(dir, false); !errors.Is(err, ErrExists) {
		t.Fatalf("err = %v, want ErrExists", err)
	}
	if err := Claim(dir, true); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("clean left %d entries", len(entries))
	}
	fresh := filepath.Join(t.TempDir(), "a", "b")
	if err := Claim(fresh, false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(fresh); err != nil || !st.IsDir() {
		t.Errorf("Claim did not create %s", fresh)
	}
}

func TestLinkLatest(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"a", "b"} {
		d := filepath.Join(root, name)
		os.Mkdir(d, 0o755)
		if err := LinkLatest(root, d); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(filepath.Join(root, Latest)); err != nil || got != name {
			t.Errorf("latest -> %q (%v), want %q", got, err, name)
		}
	}
}
