package driver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// This file keeps the tail of what a driver wrote on stderr, for the error
// that names it when it breaks.

// MaxStderr is how much of a driver's stderr is copied to the log; the
// rest is read and dropped (a driver must never block on its stderr, nor
// fill the disk with it).
const MaxStderr = 1 << 20

// maxStderrLine is the longest stderr line kept; a longer one is cut.
const maxStderrLine = 4 << 10

// copyStderr copies the driver's stderr to the log, line by line, each
// prefixed with the driver's name and cut at maxStderrLine, up to
// MaxStderr bytes, and keeps the last lines. It reads to the end.
func (p *Process) copyStderr(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	copied, dropped := 0, 0
	for {
		line, cut, err := readCut(br, maxStderrLine)
		if len(line) > 0 || (err == nil && !cut) {
			s := p.redact.Redact(strings.ToValidUTF8(string(line), "?"))
			if cut {
				s += " [cut]"
			}
			p.stderr.add(s)
			if copied < MaxStderr {
				n, _ := fmt.Fprintf(p.cfg.Log, "driver %s: %s\n", p.cfg.Name, s)
				copied += n
				if copied >= MaxStderr {
					fmt.Fprintf(p.cfg.Log, "driver %s: [stderr over %d bytes: the rest is dropped]\n", p.cfg.Name, MaxStderr)
				}
			} else {
				dropped++
			}
		}
		if err != nil {
			if dropped > 0 {
				fmt.Fprintf(p.cfg.Log, "driver %s: [%d more stderr lines dropped]\n", p.cfg.Name, dropped)
			}
			return
		}
	}
}

// readCut reads one line (without its newline), keeping at most max bytes
// of it (cut says it was longer) and discarding the rest.
func readCut(br *bufio.Reader, max int) (line []byte, cut bool, err error) {
	total := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1] // the newline
		}
		total += len(chunk)
		if room := max - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, total > max, err
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
