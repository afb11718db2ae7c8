package scenario

import (
	"regexp"
	"strings"
	"unicode"
)

// MaxCases bounds a scenario's cases, sweeps and trials expanded.
const MaxCases = 10_000

// The alphabets of names that become file names and are printed: no
// terminal escapes, no newlines, no paths.
var (
	caseName     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	scenarioName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
)

// safePoint reports whether a sweep point's name (its labels and values)
// is printable and a file name's: graphic, no space, no path or shell
// character, at most 200 bytes.
func safePoint(s string) bool {
	if len(s) > 200 {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) || strings.ContainsRune("/\\\"'`$;|&<>*?", r) {
			return false
		}
	}
	return true
}
