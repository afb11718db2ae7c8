package report

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// IndexHTML is the page over the runs of a results root.
const IndexHTML = "index.html"

// indexEntry is one results folder in the index.
type indexEntry struct {
	rel     string
	started time.Time
	sum     verdict.Summary
}

// WriteIndex writes root/index.html: one line per results folder found
// under root (two levels deep, so that the folders of `make known` are
// listed), newest first, with its scenario, time, tally and a link to its
// report. Folders whose summary.json cannot be read are listed as such.
func WriteIndex(root string) error {
	var entries []indexEntry
	var broken []string
	for _, pattern := range []string{filepath.Join(root, "*", layout.SummaryFile), filepath.Join(root, "*", "*", layout.SummaryFile)} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			return fmt.Errorf("index %s: %w", root, err)
		}
		for _, m := range matches {
			dir := filepath.Dir(m)
			if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				continue // results/latest
			}
			rel, _ := filepath.Rel(root, dir)
			e := indexEntry{rel: rel}
			b, err := os.ReadFile(m)
			if err == nil {
				err = json.Unmarshal(b, &e.sum)
			}
			if err != nil {
				broken = append(broken, rel)
				continue
			}
			if e.sum.Conditions != nil {
				e.started = e.sum.Conditions.Started
			} else if fi, err := os.Stat(m); err == nil {
				e.started = fi.ModTime()
			}
			entries = append(entries, e)
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		if !entries[i].started.Equal(entries[j].started) {
			return entries[i].started.After(entries[j].started)
		}
		return entries[i].rel < entries[j].rel
	})
	var b strings.Builder
	b.WriteString(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lockbench runs</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f2f2f2}
.bad{color:#b00;font-weight:600}.ok{color:#060}
</style></head><body>
<h1>lockbench runs</h1>
<p>Every results folder under this one, newest first. Each links to its report; <code>bench compare OLD NEW</code> compares two of them (or two folders of repeated runs).</p>
<table><tr><th>started (UTC)</th><th>scenario</th><th>folder</th><th>outcome</th><th>cases</th><th>seed</th></tr>
`)
	for _, e := range entries {
		v := e.sum.Verdicts()
		class := "ok"
		if len(e.sum.Rows) == 0 || v[verdict.RowViolation]+v[verdict.RowInvalid]+v[verdict.RowUnavailable]+v[verdict.RowNotReproduced] > 0 || e.sum.ThresholdsFailed() > 0 {
			class = "bad"
		}
		when := "?"
		if !e.started.IsZero() {
			when = e.started.UTC().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td><a href=\"%s\">%s</a></td><td class=\"%s\">%s</td><td>%d</td><td>%d</td></tr>\n",
			when, html.EscapeString(e.sum.Scenario), html.EscapeString(filepath.ToSlash(filepath.Join(e.rel, ReportHTML))), html.EscapeString(e.rel),
			class, html.EscapeString(e.sum.Tally()), len(e.sum.Cases), e.sum.Seed)
	}
	for _, r := range broken {
		fmt.Fprintf(&b, "<tr><td>?</td><td>?</td><td>%s</td><td class=\"bad\">summary.json unreadable (bench report %s)</td><td></td><td></td></tr>\n", html.EscapeString(r), html.EscapeString(r))
	}
	b.WriteString("</table></body></html>\n")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("index %s: %w", root, err)
	}
	if err := os.WriteFile(filepath.Join(root, IndexHTML), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(root, IndexHTML), err)
	}
	return nil
}
