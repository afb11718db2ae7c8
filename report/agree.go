package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lockbench/lockbench/verdict"
)

// WriteAgreement prints whether runs of one profile agree: every row's
// verdict and two-holders rate in each run, every decision cell's rates,
// and what disagreed (verdict.Agree).
func WriteAgreement(w io.Writer, a *verdict.Agreement) error {
	rate := func(r *verdict.Rate) string {
		if r == nil || r.Of == 0 {
			return "—"
		}
		return r.String()
	}
	mark := func(bad bool) string {
		if bad {
			return "✗"
		}
		return ""
	}
	fmt.Fprintf(w, "%d runs: %s\n\n", len(a.Runs), strings.Join(a.Runs, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tVERDICTS\tTWO HOLDERS\t")
	for _, r := range a.Rows {
		var vs, rs []string
		for i := range r.Verdicts {
			v := r.Verdicts[i]
			if v == "" {
				v = "—"
			}
			vs = append(vs, string(v))
			rs = append(rs, rate(r.TwoHolders[i]))
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s %s\t\n", r.Row, strings.Join(vs, " | "), mark(r.Flipped), strings.Join(rs, " | "), mark(r.Disjoint))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(a.Cells) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CELL\tTWO HOLDERS\tDAMAGE\t")
		for _, c := range a.Cells {
			var th, dm []string
			for i := range c.TwoHolders {
				th = append(th, rate(c.TwoHolders[i]))
				dm = append(dm, rate(c.Damage[i]))
			}
			fmt.Fprintf(tw, "%s × %s\t%s\t%s %s\t\n", c.Backend, c.Class, strings.Join(th, " | "), strings.Join(dm, " | "), mark(c.Disjoint))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if a.Agreed() {
		_, err := fmt.Fprintf(w, "the runs agree: no verdict flipped, every rate's 95%% intervals overlap (%d rows, %d cells)\n", len(a.Rows), len(a.Cells))
		return err
	}
	for _, l := range a.Lines() {
		fmt.Fprintln(w, l)
	}
	return nil
}
