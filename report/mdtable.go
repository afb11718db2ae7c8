package report

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a Markdown table whose columns are padded to line up, so that
// it reads as well in a terminal or a diff as rendered.
type Table struct {
	Header []string
	// Right aligns a column to the right (numbers); by index.
	Right []bool
	Rows  [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Write writes the table.
func (t *Table) Write(w io.Writer) error {
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range t.Rows {
		for i := range width {
			if i < len(r) {
				width[i] = max(width[i], utf8.RuneCountInString(r[i]))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i < len(t.Right) && t.Right[i] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for i, n := range width {
		if i < len(t.Right) && t.Right[i] {
			b.WriteString(" " + strings.Repeat("-", n-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", n) + " |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rightFrom marks columns from i on as right-aligned, of n in all.
func rightFrom(i, n int) []bool {
	r := make([]bool, n)
	for j := i; j < n; j++ {
		r[j] = true
	}
	return r
}
