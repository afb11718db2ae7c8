// Package docmark holds the generated parts of the documentation (and of
// other files) to what generates them: the text between the lines
// <!-- NAME: begin --> and <!-- NAME: end --> of a document, or a whole
// generated file, is compared with what a registry makes of itself, and
// written there again when the test runs with its update flag. Every
// generated table of the docs goes through Hold, so each is made again
// the same way.
package docmark

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Markers are the two lines around a generated part called name.
func Markers(name string) (begin, end string) {
	return "<!-- " + name + ": begin -->\n", "<!-- " + name + ": end -->"
}

// Hold fails t unless the text of doc between name's markers is want;
// with update, it writes want there instead. how is the command that
// writes it again (go test ./report -run X -update), said on failure.
func Hold(t testing.TB, doc, name, want string, update bool, how string) {
	t.Helper()
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	begin, end := Markers(name)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s between %q and %q: add the two lines where it goes, then %s", doc, name, strings.TrimSpace(begin), end, how)
	}
	if got := s[i+len(begin) : j]; got != want {
		if update {
			if err := os.WriteFile(doc, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's %s is not what generates it (%s):\n--- %s\n%s\n--- want\n%s", doc, name, how, doc, got, want)
	}
}

// HoldFile is Hold for a file generated whole.
func HoldFile(t testing.TB, path string, want []byte, update bool, how string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err == nil && bytes.Equal(got, want) {
		return
	}
	if update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v (%s writes it)", path, err, how)
		return
	}
	t.Errorf("%s is not what generates it (%s):\n--- %s\n%s\n--- want\n%s", path, how, path, got, want)
}
