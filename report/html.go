package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"net/url"
	"os"
	"path/filepath"
	"regexp"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// ReportHTML is the self-contained HTML version of report.md.
const ReportHTML = "report.html"

var imgSrc = regexp.MustCompile(`<img src="([^":/]+\.png)"`)

// WriteHTML renders report.md as report.html, with every plot embedded as a
// data URI so that the file opens anywhere, without network and without
// the rest of the folder.
func WriteHTML(dir string, md []byte, title string) error {
	var body bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert(md, &body); err != nil {
		return fmt.Errorf("render report.html: %w", err)
	}
	var embedErr error
	out := imgSrc.ReplaceAllFunc(body.Bytes(), func(m []byte) []byte {
		name := string(imgSrc.FindSubmatch(m)[1])
		// The markdown renderer escapes the link (a swept case's plot is
		// timeline-redis%5Bpause=2%C3%97lease%5D.t1.png): the file has the
		// case's own name.
		if u, err := url.PathUnescape(name); err == nil {
			name = u
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			embedErr = fmt.Errorf("embed %s in report.html: %w", name, err)
			return m
		}
		return []byte(`<img src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(b) + `"`)
	})
	if embedErr != nil {
		return embedErr
	}
	var page bytes.Buffer
	fmt.Fprintf(&page, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 7px}th{background:#f2f2f2}
td:nth-child(n+5){text-align:right}img{max-width:100%%;border:1px solid #eee;margin:.5em 0}code{background:#f4f4f4;padding:0 3px}
h1{border-bottom:2px solid #333}h3{margin-top:2em;border-bottom:1px solid #ddd}
</style></head><body>
`, html.EscapeString(title))
	page.Write(out)
	page.WriteString("</body></html>\n")
	if err := os.WriteFile(filepath.Join(dir, ReportHTML), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	return nil
}
