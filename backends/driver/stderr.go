package driver

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
)

// This file keeps the tail of what a driver wrote on stderr, for the error
// that names it when it breaks.

// copyStderr copies the driver's stderr to the log, line by line, each
// prefixed with the driver's name, and keeps the last lines.
func (p *Process) copyStderr(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for sc.Scan() {
		line := sc.Text()
		p.stderr.add(line)
		fmt.Fprintf(p.cfg.Log, "driver %s: %s\n", p.cfg.Name, line)
	}
}

// tailBuffer keeps the last lines of a stream.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tailBuffer) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, strings.TrimSpace(s))
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// said is ", its stderr ends: a | b" or "" when it wrote nothing.
func (t *tailBuffer) said() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keep []string
	for _, l := range t.lines {
		if l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return "; its stderr ends: " + strings.Join(keep, " | ")
}

// articleOf is "an" or "a" for word.
func articleOf(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
